// Turning OpenClaw's session messages into Engram's store messages.

import { createHash } from "node:crypto";
import type { StoreMessage } from "./engram.js";

type Part = { type?: string; text?: string };
type AgentMessage = {
  role?: string;
  content?: string | Part[];
  id?: string;
  messageId?: string;
  idempotencyKey?: string;
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

/** User and assistant messages with text, each with a stable msg_id: OpenClaw's own id when
 * the message carries one (a user message's idempotency key), else one derived from its role,
 * text and how many equal messages came before it in the session (the same message sent at
 * the next turn gets the same id, so Engram stores it once; its timestamp is not used, it
 * is not always the same from one turn to the next). */
export function toStoreMessages(messages: unknown[], injected: Iterable<string> = []): StoreMessage[] {
  const blocks = [...injected];
  const out: StoreMessage[] = [];
  const seen = new Map<string, number>();
  for (const raw of messages) {
    const message = raw as AgentMessage;
    if (message?.role !== "user" && message?.role !== "assistant") continue;
    const content = stripInjected(messageText(message), blocks);
    if (!content) continue;
    const timestamp = isoTime(message.timestamp);
    const nativeId = message.id ?? message.messageId ?? message.idempotencyKey;
    const key = `${message.role}\n${content}`;
    const occurrence = seen.get(key) ?? 0;
    seen.set(key, occurrence + 1);
    const msgId = typeof nativeId === "string" && nativeId
      ? nativeId
      : "oc-" + createHash("sha256").update(`${key}\n${occurrence}`).digest("hex").slice(0, 24);
    out.push({ msg_id: msgId, role: message.role, content, ...(timestamp ? { timestamp } : {}) });
  }
  return out;
}

/** True when the session has had no assistant reply yet: the first turn of a session. */
export function isFirstTurn(messages: unknown[]): boolean {
  return !messages.some((message) => (message as AgentMessage | null)?.role === "assistant");
}
