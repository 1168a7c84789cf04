// A small fetch client for the Engram routes the plugin uses. Every call has a deadline:
// memory must never make a turn slower than the caller allows.

export class EngramError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly code: string | null,
  ) {
    super(message);
    this.name = "EngramError";
  }
}

export type RecalledMemory = {
  id: string;
  text: string;
  msg_ids: string[];
  session_id: string;
  score: number;
  category: string;
};

export type RecallResult = { block: string; language: string; memories: RecalledMemory[] };

export type StoreMessage = { msg_id: string; role: "user" | "assistant"; content: string; timestamp?: string };

export class EngramClient {
  constructor(
    readonly url: string,
    readonly apiKey: string | undefined,
  ) {}

  private async call<T>(method: string, path: string, body: unknown, timeoutMs: number): Promise<T> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    let response: Response;
    try {
      response = await fetch(this.url.replace(/\/+$/, "") + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      const reason = error instanceof Error && error.name === "TimeoutError"
        ? `no answer within ${timeoutMs} ms`
        : `unreachable (${error instanceof Error ? (error.cause as Error | undefined)?.message ?? error.message : String(error)})`;
      throw new EngramError(`Engram at ${this.url} ${reason}`, null, null);
    }
    const text = await response.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      const err = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new EngramError(
        `Engram ${method} ${path}: ${response.status} ${err?.code ?? ""} ${err?.message ?? text.slice(0, 200)}`.trim(),
        response.status,
        err?.code ?? null,
      );
    }
    return parsed as T;
  }

  /** Checks the URL and the key: /healthz answers, and the key may read the namespaces. */
  async check(timeoutMs: number): Promise<void> {
    await this.call("GET", "/healthz", undefined, timeoutMs);
    await this.call("GET", "/v1/namespaces", undefined, timeoutMs);
  }

  recall(namespace: string, query: string, maxTokens: number, timeoutMs: number): Promise<RecallResult> {
    return this.call("POST", "/v1/recall", { namespace, query: query.slice(0, 4000), max_tokens: maxTokens }, timeoutMs);
  }

  context(namespace: string, maxTokens: number, timeoutMs: number): Promise<RecallResult> {
    return this.call("POST", "/v1/context", { namespace, max_tokens: maxTokens }, timeoutMs);
  }

  store(
    namespace: string,
    sessionId: string,
    messages: StoreMessage[],
    // wait: false answers once the raw log holds them, true once they are findable,
    // "built" once their memories exist (then memories_created has their ids).
    options: { wait: boolean | "built"; pinned?: boolean },
    timeoutMs: number,
  ): Promise<{ memories_created?: string[]; memories_updated?: string[]; firewalled?: unknown[]; job_id?: string | null }> {
    return this.call(
      "POST",
      "/v1/store",
      { namespace, session_id: sessionId, messages, source: "openclaw", wait: options.wait, pinned: options.pinned ?? false },
      timeoutMs,
    );
  }

  forget(memoryId: string, timeoutMs: number): Promise<unknown> {
    return this.call("POST", `/v1/memories/${encodeURIComponent(memoryId)}/forget`, {}, timeoutMs);
  }
}
