// End to end: the real `openclaw` CLI runs embedded agent turns (`openclaw agent --local`)
// with this plugin installed from its packed tarball, against a real Engram server and a
// stub OpenAI-compatible model written here that records every request it receives.
// Needs: OPENCLAW_BIN (the openclaw.mjs of the pinned package), ENGRAM_BIN (`engram`),
// PLUGIN_TGZ (`npm pack` of this package). scripts/test-openclaw sets all three.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { createServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const { OPENCLAW_BIN, ENGRAM_BIN, PLUGIN_TGZ } = process.env;
const ZH_PREFACE = "以下是你从与该用户以往的对话中记得的信息";
const EN_PREFACE = "What you remember about this user from earlier conversations";
const NAMESPACE = "openclaw-main";

const work = mkdtempSync(join(tmpdir(), "engram-openclaw-e2e-"));
const state = join(work, "state");
const configPath = join(work, "openclaw.json");
let engram;
let engramPort;
let stub;
const requests = []; // every request body the model received, in order

function freePort() {
  return new Promise((resolve) => {
    const server = createTcpServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startEngram() {
  engram = spawn(ENGRAM_BIN, ["serve"], {
    cwd: work,
    env: {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ENGRAM_"))),
      ENGRAM_ENVIRONMENT: "testing", ENGRAM_DATA_DIR: join(work, "engram-data"), ENGRAM_HOST: "127.0.0.1",
      ENGRAM_PORT: String(engramPort), ENGRAM_EMBEDDING_THREADS: "1", ENGRAM_LOG_LEVEL: "WARNING",
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const deadline = Date.now() + 240_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`http://127.0.0.1:${engramPort}/readyz`)).ok) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error("Engram did not become ready");
}

function contentText(m) {
  return typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text ?? "").join("\n");
}

// The model: a tool call to memory_recall when the user asks for one, the tool's answer
// repeated back after it (so capture sees an assistant quoting the block), else "OK".
function answer(body) {
  const messages = body.messages ?? [];
  // OpenClaw may append its internal context (role user) after the tool result.
  const tools = messages.filter((m) => m.role === "tool");
  if (tools.length > 0) return { content: contentText(tools[tools.length - 1]) };
  // The latest user turn may be followed by OpenClaw's internal context (also role user).
  const users = messages.filter((m) => m.role === "user").map(contentText).join("\n");
  const match = /RECALL\[(.+?)\]/.exec(users);
  if (match) {
    // This OpenClaw puts plugin tools behind Tool Search: a model calls them through
    // tool_call unless they are offered directly.
    const direct = (body.tools ?? []).some((t) => t.function?.name === "memory_recall");
    const args = { query: match[1] };
    return { toolCall: direct
      ? { name: "memory_recall", arguments: JSON.stringify(args) }
      : { name: "tool_call", arguments: JSON.stringify({ id: "memory_recall", args }) } };
  }
  return { content: "好的，记住了。OK, noted." };
}

function startStub() {
  stub = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      if (!req.url.endsWith("/chat/completions")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ data: [{ id: "stub-model", object: "model" }] }));
        return;
      }
      const body = JSON.parse(raw);
      requests.push(body);
      const reply = answer(body);
      const id = `chatcmpl-${requests.length}`;
      const delta = reply.toolCall
        ? { role: "assistant", tool_calls: [{ index: 0, id: `call_${requests.length}`, type: "function", function: reply.toolCall }] }
        : { role: "assistant", content: reply.content };
      const finish = reply.toolCall ? "tool_calls" : "stop";
      const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
      if (body.stream) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const chunk = (choice) => `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: "stub-model", choices: [choice] })}\n\n`;
        res.write(chunk({ index: 0, delta, finish_reason: null }));
        res.write(chunk({ index: 0, delta: {}, finish_reason: finish }));
        res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: "stub-model", choices: [], usage })}\n\n`);
        res.end("data: [DONE]\n\n");
      } else {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ id, object: "chat.completion", created: 1, model: "stub-model",
          choices: [{ index: 0, message: delta, finish_reason: finish }], usage }));
      }
    });
  });
  return new Promise((resolve) => stub.listen(0, "127.0.0.1", resolve));
}

function openclawEnv() {
  return { ...process.env, HOME: work, OPENCLAW_STATE_DIR: state, OPENCLAW_CONFIG_PATH: configPath, NO_COLOR: "1" };
}

async function openclaw(args, timeout = 240_000) {
  return run(process.execPath, [OPENCLAW_BIN, ...args], { env: openclawEnv(), timeout, maxBuffer: 64 << 20 });
}

async function turn(sessionId, message) {
  const started = Date.now();
  const { stdout, stderr } = await openclaw(["agent", "--local", "--session-id", sessionId, "--message", message, "--json"]);
  for (const line of stderr.split("\n")) if (line.includes("memory-engram") || line.includes("hook")) console.log(`  [${sessionId}] ${line.slice(0, 400)}`);
  return { stdout, stderr, ms: Date.now() - started };
}

async function memoryTexts() {
  const r = await fetch(`http://127.0.0.1:${engramPort}/v1/memories?namespace=${NAMESPACE}&limit=100`);
  const body = await r.json();
  const items = body.items ?? body.memories ?? [];
  return items.map((m) => m.text);
}

async function waitForMemories(predicate, what) {
  const deadline = Date.now() + 60_000;
  let texts = [];
  while (Date.now() < deadline) {
    texts = await memoryTexts();
    if (predicate(texts.join("\n"))) return texts;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`Engram never held ${what}; memories: ${JSON.stringify(texts)}`);
}

before(async () => {
  assert.ok(OPENCLAW_BIN && ENGRAM_BIN && PLUGIN_TGZ, "OPENCLAW_BIN, ENGRAM_BIN and PLUGIN_TGZ must be set");
  engramPort = await freePort();
  await Promise.all([startEngram(), startStub()]);
  const modelUrl = `http://127.0.0.1:${stub.address().port}/v1`;
  writeFileSync(configPath, JSON.stringify({}));
  // Installed as a user installs it: from the packed tarball.
  await openclaw(["plugins", "install", "--force", "--accept-capabilities", PLUGIN_TGZ]);
  const config = JSON.parse(readFileSync(configPath, "utf8"));
  config.models = { providers: { stub: {
    baseUrl: modelUrl, apiKey: "stub-key", api: "openai-completions",
    models: [{ id: "stub-model", name: "Stub", reasoning: false, input: ["text"], contextWindow: 200000, maxTokens: 1024,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }],
  } } };
  config.agents = { defaults: { model: { primary: "stub/stub-model" }, workspace: join(work, "workspace") } };
  config.plugins = {
    ...config.plugins,
    slots: { memory: "memory-engram" },
    entries: { ...config.plugins?.entries, "memory-engram": {
      enabled: true,
      hooks: { allowConversationAccess: true },
      config: { url: `http://127.0.0.1:${engramPort}`, namespace: "openclaw-{agentId}", budget: 600, timeoutMs: 800 },
    } },
  };
  writeFileSync(configPath, JSON.stringify(config, null, 2));
});

after(async () => {
  engram?.kill("SIGTERM");
  stub?.close();
  writeFileSync(join(work, "requests.json"), JSON.stringify(requests, null, 1));
  if (!process.env.KEEP_E2E) rmSync(work, { recursive: true, force: true });
  else console.log("kept", work);
});

test("memory_store names the memory it stored, and memory_forget takes that id", async () => {
  const { createPlugin } = await import("../dist/index.js");
  const { parseConfig } = await import("../dist/config.js");
  const plugin = createPlugin(parseConfig({ url: `http://127.0.0.1:${engramPort}` }), { info() {}, warn() {} });
  const tool = (name) => plugin.tools({ agentId: "tools" }).find((t) => t.name === name);
  for (const text of ["我对花生过敏，吃了会起疹子。", "My passport expires in March 2031."]) {
    const stored = await tool("memory_store").execute("call-1", { text });
    const [id] = stored.details.memoryIds;
    assert.ok(id?.startsWith("mem_") && stored.content[0].text.includes(id), JSON.stringify(stored));
    const memory = await fetch(`http://127.0.0.1:${engramPort}/v1/memories/${id}`);
    assert.equal(memory.status, 200);
    assert.ok((await memory.json()).text.includes(text), "the id is the stored note's memory");
    const forgot = await tool("memory_forget").execute("call-2", { memoryId: id });
    assert.ok(!forgot.details.error, JSON.stringify(forgot));
  }
});

test("session 1 facts come back in session 2, the block is not stored, and a down Engram costs no turn", async () => {
  // Session 1: facts in Chinese and in English, captured after each turn.
  const t1 = await turn("s1", "下周二上午我要去医院体检，记得提醒我。");
  const t2 = await turn("s1", "We decided to use LanceDB for the memory store of project Falcon.");
  console.log("session 1 turns (ms):", t1.ms, t2.ms);
  await waitForMemories((all) => all.includes("体检") && all.includes("LanceDB"), "both facts");

  // Session 2: the model's first request carries both facts; its memory_recall call returns them.
  const before2 = requests.length;
  const t3 = await turn("s2", "我的体检是哪天？Which database did we pick? RECALL[体检 database LanceDB]");
  const s2 = requests.slice(before2);
  if (s2.length < 2) console.log("session 2 turn output:", t3.stdout.slice(0, 3000), t3.stderr.slice(-3000));
  assert.ok(s2.length >= 2, `expected a tool round trip, got ${s2.length} model requests`);
  const first = JSON.stringify(s2[0].messages);
  // Words of the facts that the question does not contain.
  assert.ok(first.includes("下周二上午") && first.includes("project Falcon"), "auto-recall put both facts into the model's context");
  assert.ok(first.includes(ZH_PREFACE) || first.includes(EN_PREFACE), "the injected block is Engram's");
  const toolMessage = s2[1].messages.find((m) => m.role === "tool");
  assert.ok(toolMessage, "the tool result went back to the model");
  const toolText = contentText(toolMessage);
  assert.ok(toolText.includes("下周二上午") && toolText.includes("project Falcon"), `memory_recall returned the facts: ${toolText}`);
  console.log("session 2 turn (ms):", t3.ms);

  // Capture of session 2 stored the user's question but neither the injected block (taken
  // out of the user's message) nor the assistant's reply quoting it (Engram's firewall).
  await waitForMemories((all) => all.includes("Which database did we pick?"), "session 2's question");
  await new Promise((r) => setTimeout(r, 3000));
  const texts = await memoryTexts();
  for (const text of texts) {
    assert.ok(!text.includes(ZH_PREFACE) && !text.includes(EN_PREFACE), `a memory holds the injected block: ${text}`);
  }

  // Engram down, then hanging: each turn still completes, without memory.
  engram.kill("SIGTERM");
  await new Promise((r) => engram.once("exit", r));
  const before4 = requests.length;
  const t4 = await turn("s3", "Engram is down now; 你好");
  assert.equal(requests.length - before4, 1, "the model was called once");
  assert.ok(!JSON.stringify(requests[before4].messages).includes(EN_PREFACE));
  assert.match(t4.stdout + t4.stderr, /memory-engram: recall skipped/);

  const sockets = [];
  const hanging = createTcpServer((s) => sockets.push(s)).listen(engramPort, "127.0.0.1");
  await new Promise((r) => hanging.once("listening", r));
  try {
    const t5 = await turn("s4", "Engram hangs now; 你好");
    assert.match(t5.stdout + t5.stderr, /no answer within 800 ms/);
    console.log("turns with Engram down / hanging (ms):", t4.ms, t5.ms);
  } finally {
    sockets.forEach((s) => s.destroy());
    hanging.close();
  }
});
