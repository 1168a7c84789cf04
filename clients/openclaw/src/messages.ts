// Turning OpenClaw's session messages into Engram's store messages.

import { createHash } from "node:crypto";
import type { StoreMessage } from "./engram.js";

type Part = { type?: string; text?: string };
type AgentMessage = {
  role?: string;
  content?: string | Part[];
  timestamp?: number | string;
};

/** The text of a message: its string content, or its text parts joined. */
export function messageText(message: unknown): string {
  const content = (message as AgentMessage | null)?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part) => part && part.type === "text" && typeof part.text === "string")
    .map((part) => part.text as string)
    .join("\n");
}

/** Removes every block this plugin injected from a text, so a user's message is stored
 * as the user wrote it (Engram's firewall would otherwise drop the whole message). */
export function stripInjected(text: string, injected: Iterable<string>): string {
  let result = text;
  for (const block of injected) {
    if (block) result = result.split(block).join("");
  }
  return result.trim();
}

function isoTime(value: number | string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** User and assistant messages with text, each with a msg_id derived from its role, text and
 * how many equal messages came before it in the session, so the same message sent again at
 * the next turn gets the same id and Engram stores it once. Not OpenClaw's own ids: in
 * openclaw 2026.9.6 agent_end's messages carry none (the transcript's entry ids stay in the
 * transcript), and a user message's idempotencyKey is present only once it has been read
 * back from the transcript, so the same message would get two ids. Not the timestamp
 * either: it also changes between the turn and the next. */
export function toStoreMessages(messages: unknown[], injected: Iterable<string> = []): StoreMessage[] {
  const blocks = [...injected];
  const out: StoreMessage[] = [];
  const seen = new Map<string, number>();
  for (const raw of messages) {
    const message = raw as AgentMessage;
    if (message?.role !== "user" && message?.role !== "assistant") continue;
    // Only a user message can carry what the plugin prepended; anything else that quotes
    // recalled memories is Engram's firewall's to judge.
    const text = messageText(message);
    const content = message.role === "user" ? stripInjected(text, blocks) : text.trim();
    if (!content) continue;
    const timestamp = isoTime(message.timestamp);
    const key = `${message.role}\n${content}`;
    const occurrence = seen.get(key) ?? 0;
    seen.set(key, occurrence + 1);
    const msgId = "oc-" + createHash("sha256").update(`${key}\n${occurrence}`).digest("hex").slice(0, 24);
    out.push({ msg_id: msgId, role: message.role, content, ...(timestamp ? { timestamp } : {}) });
  }
  return out;
}

/** True when the session has had no assistant reply yet: the first turn of a session. */
export function isFirstTurn(messages: unknown[]): boolean {
  return !messages.some((message) => (message as AgentMessage | null)?.role === "assistant");
}
