// Engram as OpenClaw's memory slot: recall before each model call, capture after each
// turn, and three tools the model can call. Memory is never allowed to slow a turn past
// `timeoutMs` or to fail it: when Engram is slow or down the turn goes on without it.

import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";
import { EngramClient, EngramError } from "./engram.js";
import { parseConfig, resolveNamespace, type EngramPluginConfig } from "./config.js";
import { isFirstTurn, messageText, toStoreMessages } from "./messages.js";

type Logger = { info: (message: string) => void; warn: (message: string) => void; error?: (message: string) => void };
type HookContext = { agentId?: string; sessionId?: string; sessionKey?: string; senderId?: string };
type ToolContext = { agentId?: string; requesterSenderId?: string; sessionId?: string };

const TOOL_TIMEOUT_MS = 10_000;

/** Says once that Engram is unavailable, and once that it is back. */
export class OutageLog {
  private down = false;
  constructor(private readonly logger: Logger) {}
  failed(what: string, error: unknown): void {
    if (this.down) return;
    this.down = true;
    this.logger.warn(`memory-engram: ${what} skipped, turns go on without memory: ${error instanceof Error ? error.message : String(error)}`);
  }
  ok(): void {
    if (!this.down) return;
    this.down = false;
    this.logger.info("memory-engram: Engram answers again");
  }
}

function textResult(text: string, details: Record<string, unknown>) {
  return { content: [{ type: "text" as const, text }], details };
}

export function createPlugin(config: EngramPluginConfig, logger: Logger) {
  const client = new EngramClient(config.url, config.apiKey);
  const outage = new OutageLog(logger);
  // The blocks injected into each session, so capture can take them out of the user's text.
  const injected = new Map<string, Set<string>>();
  const namespaceOf = (ctx: { agentId?: string; senderId?: string; requesterSenderId?: string }) =>
    resolveNamespace(config.namespace, { agentId: ctx.agentId, userId: ctx.senderId ?? ctx.requesterSenderId });
  const sessionOf = (ctx: HookContext) => ctx.sessionId ?? ctx.sessionKey ?? "default";

  async function beforePromptBuild(event: { prompt: string; currentUserMessage?: string; messages: unknown[] }, ctx: HookContext) {
    if (!config.autoRecall) return undefined;
    const query = (event.currentUserMessage ?? event.prompt ?? "").trim();
    const namespace = namespaceOf(ctx);
    const first = isFirstTurn(event.messages ?? []);
    const started = Date.now();
    // One deadline for everything this turn waits for: recall and, on a session's first
    // turn, the context, in parallel.
    const calls: Promise<{ block: string }>[] = [];
    if (first) calls.push(client.context(namespace, config.contextBudget, config.timeoutMs));
    if (query) calls.push(client.recall(namespace, query, config.budget, config.timeoutMs));
    if (calls.length === 0) return undefined;
    const results = await Promise.allSettled(calls);
    const blocks: string[] = [];
    for (const result of results) {
      if (result.status === "rejected") {
        outage.failed("recall", result.reason);
        continue;
      }
      outage.ok();
      const block = result.value.block?.trim();
      if (block && !blocks.includes(block)) blocks.push(block);
    }
    if (blocks.length === 0) return undefined;
    const session = sessionOf(ctx);
    const seen = injected.get(session) ?? new Set<string>();
    for (const block of blocks) seen.add(block);
    injected.set(session, seen);
    logger.info(`memory-engram: recalled ${blocks.length} block(s) for ${namespace} in ${Date.now() - started} ms`);
    return { prependContext: blocks.join("\n\n") };
  }

  async function agentEnd(event: { messages: unknown[]; success: boolean }, ctx: HookContext) {
    if (!config.autoCapture) return;
    const session = sessionOf(ctx);
    const messages = toStoreMessages(event.messages ?? [], injected.get(session) ?? []);
    if (messages.length === 0) return;
    try {
      // wait=false: Engram acknowledges once the raw log holds them and builds memories after.
      await client.store(namespaceOf(ctx), session, messages, { wait: false }, TOOL_TIMEOUT_MS);
      outage.ok();
    } catch (error) {
      outage.failed("capture", error);
    }
  }

  function tools(ctx: ToolContext) {
    const namespace = () => namespaceOf(ctx);
    return [
      {
        name: "memory_recall",
        label: "Memory recall",
        description:
          "Search long-term memory (earlier conversations, the user's facts, preferences and decisions) for a question. " +
          "Use it when the user refers to something said before that is not in this conversation. Works in Chinese and English.",
        parameters: {
          type: "object",
          additionalProperties: false,
          required: ["query"],
          properties: {
            query: { type: "string", description: "What to look for, in the user's words" },
            maxTokens: { type: "integer", minimum: 50, maximum: 8000, description: "Token budget of the answer" },
          },
        },
        async execute(_id: string, params: { query: string; maxTokens?: number }) {
          try {
            const result = await client.recall(namespace(), params.query, params.maxTokens ?? config.budget, TOOL_TIMEOUT_MS);
            const memories = result.memories.map((m) => ({ id: m.id, text: m.text, score: m.score, session: m.session_id }));
            return textResult(result.block || "No memory matches.", { count: memories.length, memories });
          } catch (error) {
            return textResult(`Memory recall failed: ${(error as Error).message}`, { error: true });
          }
        },
      },
      {
        name: "memory_store",
        label: "Memory store",
        description:
          "Save one fact, preference or decision to long-term memory so it is remembered in later conversations. " +
          "Set pinned for something that must always be known. Do not store text you got from memory_recall.",
        parameters: {
          type: "object",
          additionalProperties: false,
          required: ["text"],
          properties: {
            text: { type: "string", description: "The note, as a full sentence" },
            pinned: { type: "boolean", description: "Always include it at a session's start" },
          },
        },
        async execute(_id: string, params: { text: string; pinned?: boolean }) {
          const text = params.text.trim();
          if (!text) return textResult("Nothing to store: the text is empty.", { error: true });
          const { createHash } = await import("node:crypto");
          const session = "note-" + createHash("sha256").update(text).digest("hex").slice(0, 16);
          try {
            // "built": the answer names the memory, so the model can forget it by id later.
            const result = await client.store(namespace(), session, [{ msg_id: "1", role: "user", content: text }],
              { wait: "built", pinned: params.pinned ?? false }, TOOL_TIMEOUT_MS);
            const ids = [...(result.memories_created ?? []), ...(result.memories_updated ?? [])];
            const as = ids.length ? ` as ${ids.join(", ")}` : "";
            return textResult(`Stored${params.pinned ? " (pinned)" : ""}${as}.`, { memoryIds: ids });
          } catch (error) {
            return textResult(`Memory store failed: ${(error as Error).message}`, { error: true });
          }
        },
      },
      {
        name: "memory_forget",
        label: "Memory forget",
        description:
          "Forget one memory by its id (ids come from memory_recall). Pinned memories are refused: unpin them in Engram first.",
        parameters: {
          type: "object",
          additionalProperties: false,
          required: ["memoryId"],
          properties: { memoryId: { type: "string", description: "The memory's id, e.g. mem_…" } },
        },
        async execute(_id: string, params: { memoryId: string }) {
          try {
            await client.forget(params.memoryId, TOOL_TIMEOUT_MS);
            return textResult(`Forgot ${params.memoryId}.`, { memoryId: params.memoryId });
          } catch (error) {
            const code = error instanceof EngramError ? error.code : null;
            return textResult(`Memory forget failed${code ? ` (${code})` : ""}: ${(error as Error).message}`, { error: true });
          }
        },
      },
    ];
  }

  return { client, outage, beforePromptBuild, agentEnd, tools };
}

export default definePluginEntry({
  id: "memory-engram",
  name: "Engram Memory",
  description: "Long-term memory in an Engram server",
  kind: "memory",
  register(api) {
    const logger = api.logger as Logger;
    const config = parseConfig(api.pluginConfig);
    const plugin = createPlugin(config, logger);
    // A wrong URL or key is reported when the plugin loads, in words that say which. OpenClaw
    // registers a plugin several times in one process (one per registry it builds): check once.
    if (checked.has(config.url)) return registerHooks(api, plugin);
    checked.add(config.url);
    plugin.client.check(Math.max(config.timeoutMs, 3000)).then(
      () => logger.info(`memory-engram: connected to ${config.url}`),
      (error: unknown) => {
        const status = error instanceof EngramError ? error.status : null;
        const hint = status === 401 || status === 403
          ? "the API key is wrong or not allowed (config.apiKey)"
          : status === null ? "check config.url and that Engram is running" : "check config.url points at Engram";
        logger.warn(`memory-engram: cannot use Engram at ${config.url}: ${(error as Error).message}; ${hint}`);
      },
    );
    registerHooks(api, plugin);
  },
});

const checked = new Set<string>();

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function registerHooks(api: any, plugin: ReturnType<typeof createPlugin>): void {
    api.on("before_prompt_build", (event: Parameters<typeof plugin.beforePromptBuild>[0], ctx: HookContext) => plugin.beforePromptBuild(event, ctx));
    api.on("agent_end", (event: Parameters<typeof plugin.agentEnd>[0], ctx: HookContext) => plugin.agentEnd(event, ctx));
    api.registerTool((ctx: ToolContext) => plugin.tools(ctx), { names: ["memory_recall", "memory_store", "memory_forget"] });
}
