// Every call the page makes goes through here: the public API with the signed-in key.

const KEY = "engram.apiKey";

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set key(value) {
    if (value === null) sessionStorage.removeItem(KEY);
    else sessionStorage.setItem(KEY, value);
  },
  get signedIn() { return sessionStorage.getItem(KEY) !== null; },
};

export async function api(method, path, { query, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    // Only the parameters that are set: the API refuses unknown or empty ones.
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const headers = { Accept: "application/json" };
  if (session.key) headers.Authorization = `Bearer ${session.key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { raw: text }; }
  if (!response.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(response.status, err.code || String(response.status),
                       err.message || response.statusText || "request failed", err.details);
  }
  return data;
}

export const get = (path, query) => api("GET", path, { query });
export const post = (path, body) => api("POST", path, { body: body ?? {} });
export const patch = (path, body) => api("PATCH", path, { body });
