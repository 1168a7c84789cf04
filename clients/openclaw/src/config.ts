// The plugin's settings, validated once at registration with messages that name the field.

export type EngramPluginConfig = {
  url: string;
  apiKey?: string;
  namespace: string;
  budget: number;
  contextBudget: number;
  autoRecall: boolean;
  autoCapture: boolean;
  timeoutMs: number;
};

const NAMESPACE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

function expandEnv(value: string): string {
  return value.replace(/\$\{([A-Z0-9_]+)\}/g, (_, name: string) => process.env[name] ?? "");
}

function int(raw: Record<string, unknown>, key: string, fallback: number, min: number, max: number): number {
  const value = raw[key] ?? fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new Error(`memory-engram: config.${key} must be an integer in ${min}..${max}, got ${JSON.stringify(value)}`);
  }
  return value;
}

function bool(raw: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const value = raw[key] ?? fallback;
  if (typeof value !== "boolean") throw new Error(`memory-engram: config.${key} must be true or false`);
  return value;
}

export function parseConfig(input: unknown): EngramPluginConfig {
  const raw = (input ?? {}) as Record<string, unknown>;
  const url = typeof raw.url === "string" ? expandEnv(raw.url).trim() : "";
  if (!/^https?:\/\/[^/\s]+/.test(url)) {
    throw new Error(`memory-engram: config.url must be the Engram server's http(s) URL, got ${JSON.stringify(raw.url)}`);
  }
  const apiKey = typeof raw.apiKey === "string" && raw.apiKey ? expandEnv(raw.apiKey) : undefined;
  const namespace = typeof raw.namespace === "string" ? raw.namespace : "openclaw-{agentId}";
  return {
    url,
    apiKey: apiKey || undefined,
    namespace,
    budget: int(raw, "budget", 600, 50, 8000),
    contextBudget: int(raw, "contextBudget", 400, 50, 8000),
    autoRecall: bool(raw, "autoRecall", true),
    autoCapture: bool(raw, "autoCapture", true),
    timeoutMs: int(raw, "timeoutMs", 800, 50, 30000),
  };
}

/** The namespace of an agent and user: the template with {agentId} and {userId} filled, each
 * reduced to the characters Engram's namespaces allow. */
export function resolveNamespace(template: string, ids: { agentId?: string; userId?: string }): string {
  const clean = (value: string | undefined, fallback: string) =>
    (value ?? "").replace(/[^A-Za-z0-9_.:-]/g, "_").replace(/^[^A-Za-z0-9]+/, "") || fallback;
  const namespace = template
    .replaceAll("{agentId}", clean(ids.agentId, "main"))
    .replaceAll("{userId}", clean(ids.userId, "default"))
    .slice(0, 128);
  if (!NAMESPACE.test(namespace)) {
    throw new Error(`memory-engram: namespace ${JSON.stringify(namespace)} (from ${JSON.stringify(template)}) is not a valid Engram namespace`);
  }
  return namespace;
}
