// Unit tests of the plugin's pure parts: config, namespaces, message conversion, and the
// recall deadline against a loopback server that never answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { parseConfig, resolveNamespace } from "../dist/config.js";
import { toStoreMessages, isFirstTurn } from "../dist/messages.js";
import { createPlugin } from "../dist/index.js";

test("config: defaults, and errors that name the field", () => {
  const c = parseConfig({ url: "http://127.0.0.1:8420" });
  assert.equal(c.timeoutMs, 800);
  assert.equal(c.autoRecall, true);
  assert.throws(() => parseConfig({ url: "127.0.0.1:8420" }), /config\.url/);
  assert.throws(() => parseConfig({ url: "http://x", timeoutMs: 10 }), /config\.timeoutMs/);
});

test("namespace template: agent and user, cleaned to Engram's alphabet", () => {
  assert.equal(resolveNamespace("openclaw-{agentId}", { agentId: "main" }), "openclaw-main");
  assert.equal(resolveNamespace("{agentId}.{userId}", { agentId: "ops", userId: "张三 @tg" }), "ops.tg");
  assert.equal(resolveNamespace("oc-{userId}", {}), "oc-default");
});

test("messages: user and assistant text, the injected block taken out, stable ids", () => {
  const block = "What you remember about this user from earlier conversations is below.\n- x";
  const msgs = [
    { role: "user", content: [{ type: "text", text: `${block}\n\n下周二体检` }], timestamp: 1764800000000 },
    { role: "assistant", content: [{ type: "text", text: "好的" }, { type: "toolCall", id: "c" }] },
    { role: "toolResult", content: [{ type: "text", text: "ignored" }] },
  ];
  const out = toStoreMessages(msgs, [block]);
  assert.equal(out.length, 2);
  assert.equal(out[0].content, "下周二体检");
  // The same message read back at the next turn (another time, an idempotency key added)
  // keeps its id; a second equal message gets another one.
  const again = [{ ...msgs[0], timestamp: 1764800009999, idempotencyKey: "k:user" }, msgs[1], msgs[0]];
  const ids = toStoreMessages(again, [block]).map((m) => m.msg_id);
  assert.equal(ids[0], out[0].msg_id);
  assert.notEqual(ids[2], ids[0]);
  assert.ok(isFirstTurn(msgs.slice(0, 1)));
  assert.ok(!isFirstTurn(msgs));
});

test("auto-recall gives up at the deadline and logs once", async () => {
  const sockets = [];
  const server = createServer((s) => sockets.push(s)).listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  const warnings = [];
  const logger = { info() {}, warn: (m) => warnings.push(m) };
  const plugin = createPlugin(parseConfig({ url: `http://127.0.0.1:${server.address().port}`, timeoutMs: 300 }), logger);
  for (const text of ["hello", "你好"]) {
    const started = Date.now();
    const result = await plugin.beforePromptBuild({ prompt: text, messages: [] }, { agentId: "main", sessionId: "s" });
    assert.equal(result, undefined);
    assert.ok(Date.now() - started < 1500, `took ${Date.now() - started} ms`);
  }
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /no answer within 300 ms/);
  sockets.forEach((s) => s.destroy());
  server.close();
});
