// The memory inspector: hash routes, one view function per page, all data from /v1.

import { ApiError, get, patch, post, session } from "./api.js";
import { bar, clear, field, h, num, table, when } from "./dom.js";
import { applyStaticText, setLanguage, t } from "./i18n.js";

const CATEGORIES = ["decision", "preference", "learning", "task", "progress", "question",
  "note", "general"];
const TIERS = ["session", "daily", "longterm"];
const STATES = ["active", "compressed", "forgotten", "any"];
const PAGE = 25;
const NS_KEY = "engram.namespace";
const ICONS = { created: "🆕", accessed: "👁️", evolved: "📝", edited: "✏️", promoted: "⬆️",
  merged: "🔀", compressed: "🗜️", forgotten: "🗑️", restored: "♻️", superseded: "⤴️",
  pinned: "📌", unpinned: "📍" };

// Role names as shown (t() keys); the API's values stay in the data attributes.
const ROLES = { user: "User", assistant: "Assistant", system: "System", tool: "Tool" };

const main = document.getElementById("main");

// --- routing -----------------------------------------------------------------------------

function route() {
  const raw = window.location.hash.replace(/^#\/?/, "");
  const [path, search] = raw.split("?");
  const parts = path.split("/").filter(Boolean);
  return { view: parts[0] || "namespaces", arg: parts[1] ? decodeURIComponent(parts[1]) : null,
    params: new URLSearchParams(search || "") };
}

export function go(view, params = {}, arg = null) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" &&
    v !== null && v !== undefined)).toString();
  const target = `#/${view}${arg ? "/" + encodeURIComponent(arg) : ""}${query ? "?" + query : ""}`;
  if (window.location.hash === target) render();
  else window.location.hash = target;
}

function namespace(params) {
  const ns = params.get("ns") || sessionStorage.getItem(NS_KEY) || "";
  if (ns) sessionStorage.setItem(NS_KEY, ns);
  return ns;
}

const VIEWS = { namespaces, memories, memory, recall, compression };
let rendering = 0;  // a slow view that finishes after the user moved on must not show

async function render() {
  const generation = ++rendering;
  const nav = document.getElementById("nav");
  const signout = document.getElementById("signout");
  if (!session.signedIn) {
    nav.hidden = true;
    signout.hidden = true;
    document.getElementById("who").textContent = "";
    return signIn();
  }
  nav.hidden = false;
  signout.hidden = false;
  const { view, arg, params } = route();
  for (const link of nav.querySelectorAll("a")) {
    link.classList.toggle("active", link.dataset.view === view ||
      (view === "memory" && link.dataset.view === "memories"));
    const ns = sessionStorage.getItem(NS_KEY);
    if (ns && link.dataset.view !== "namespaces") {
      link.href = `#/${link.dataset.view}?ns=${encodeURIComponent(ns)}`;
    }
  }
  const show = VIEWS[view] || namespaces;
  clear(main).append(h("p", { class: "loading" }, t("Loading…")));
  try {
    const content = await show(params, arg);
    if (generation === rendering) clear(main).append(content);
  } catch (err) {
    if (generation !== rendering) return;
    if (err instanceof ApiError && err.status === 401) {
      session.key = null;
      toast(t("The API key was not accepted: sign in again."));
      return render();
    }
    clear(main).append(problem(err));
  }
}

function problem(err) {
  const text = err instanceof ApiError ? `${err.status} ${err.code}: ${err.message}` : String(err);
  return h("p", { class: "error", role: "alert", testid: "error" }, text);
}

function toast(message) {
  const el = document.getElementById("toast");
  el.textContent = message;
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, 4000);
}

// Run an action from a button: disable it meanwhile, show the API's error next to it.
function action(button, run) {
  return async () => {
    button.disabled = true;
    try {
      await run();
    } catch (err) {
      button.after(problem(err));
    } finally {
      button.disabled = false;
    }
  };
}

// --- sign in -----------------------------------------------------------------------------

function signIn() {
  const key = h("input", { type: "password", name: "key", autocomplete: "off",
    testid: "api-key", placeholder: t("API key") });
  const out = h("div");
  const form = h("form", { class: "card narrow", testid: "signin" },
    h("h1", {}, t("Sign in")),
    h("p", {}, t("Use an Engram API key."), " ",
      t("It is kept in this browser tab only (sessionStorage) and sent with each API call."),
      " ", t("A key limited to some namespaces sees only those.")),
    field(t("API key"), key, t("Leave empty for a local server without keys.")),
    h("button", { type: "submit", testid: "signin-submit" }, t("Sign in")), out);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    session.key = key.value.trim();
    try {
      await get("/v1/namespaces");
      if (window.location.hash === "#/") render();
      else window.location.hash = "#/";  // hashchange renders
    } catch (err) {
      session.key = null;
      clear(out).append(problem(err));
    }
  });
  clear(main).append(form);
  key.focus();
}

document.getElementById("signout").addEventListener("click", () => {
  session.key = null;
  sessionStorage.removeItem(NS_KEY);
  window.location.hash = "#/";
  render();
});

// --- namespaces --------------------------------------------------------------------------

async function namespaces() {
  const data = await get("/v1/namespaces");
  const rows = data.namespaces;
  const pick = (ns) => h("a", { href: `#/memories?ns=${encodeURIComponent(ns.namespace)}`,
    testid: "namespace-link" }, ns.namespace);
  return h("section", { testid: "view-namespaces" },
    h("h1", {}, t("Namespaces")),
    h("p", { class: "muted" }, t("{n} namespace(s) this key may read.", { n: rows.length })),
    table([
      { label: t("Namespace"), cell: pick },
      { label: t("Memories"), cell: (ns) => ns.memories },
      { label: t("Sessions"), cell: (ns) => ns.sessions },
      { label: t("Pinned"), cell: (ns) => ns.pinned },
      { label: t("Last stored"), cell: (ns) => when(ns.last_stored_at) },
      { label: "", cell: (ns) => h("span", { class: "actions" },
        h("a", { href: `#/recall?ns=${encodeURIComponent(ns.namespace)}` }, "recall"),
        h("a", { href: `#/compression?ns=${encodeURIComponent(ns.namespace)}` }, "compression")) },
    ], rows, { testid: "namespaces", empty: t("No namespaces yet: store a session first.") }));
}

function needNamespace(title) {
  return h("section", {}, h("h1", {}, title),
    h("p", {}, t("Choose a namespace first:"), " ", h("a", { href: "#/" }, t("Namespaces"))));
}

// --- memories ----------------------------------------------------------------------------

const FILTERS = ["q", "session_id", "category", "tier", "branch", "tag", "state",
  "min_importance", "pinned"];

async function memories(params) {
  const ns = namespace(params);
  if (!ns) return needNamespace(t("Memories"));
  const page = Math.max(0, Number(params.get("page") || 0));
  const size = Math.min(500, Math.max(1, Number(params.get("limit") || PAGE)));
  const query = { namespace: ns, offset: page * size, limit: size };
  for (const name of FILTERS) query[name] = params.get(name) || "";
  const data = await get("/v1/memories", query);

  const input = (name, attrs = {}) => h("input", { name, value: params.get(name) || "",
    testid: `filter-${name}`, ...attrs });
  const select = (name, options, blank = "any") => {
    const el = h("select", { name, testid: `filter-${name}` },
      h("option", { value: "" }, blank), options.map((o) => h("option", { value: o }, o)));
    el.value = params.get(name) || "";
    return el;
  };
  const form = h("form", { class: "filters", testid: "memory-filters" },
    field(t("Search"), input("q", { type: "search", placeholder: t("text, 中文 or English") })),
    field(t("Session"), input("session_id")),
    field(t("Category"), select("category", CATEGORIES)),
    field(t("Tier"), select("tier", TIERS)),
    field(t("Branch"), input("branch")),
    field(t("Tag"), input("tag")),
    field(t("State"), select("state", STATES.filter((s) => s !== "active"), "active")),
    field(t("Min importance"), input("min_importance", { type: "number", min: 1, max: 10 })),
    field(t("Pinned"), select("pinned", ["true", "false"])),
    h("button", { type: "submit", testid: "filter-submit" }, t("Apply")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = { ns };
    for (const [name, value] of new FormData(form).entries()) values[name] = String(value).trim();
    go("memories", values);
  });

  const from = data.count ? data.offset + 1 : 0;
  const to = data.offset + data.items.length;
  const pager = h("div", { class: "pager" },
    h("button", { type: "button", disabled: page === 0, testid: "page-prev",
      onclick: () => go("memories", { ...Object.fromEntries(params), ns, page: page - 1 }) },
    t("← Newer")),
    h("span", { testid: "page-info" }, `${from}–${to} of ${data.count}`),
    h("button", { type: "button", disabled: to >= data.count, testid: "page-next",
      onclick: () => go("memories", { ...Object.fromEntries(params), ns, page: page + 1 }) },
    t("Older →")));
  const searching = Boolean(params.get("q"));
  return h("section", { testid: "view-memories" },
    h("h1", {}, t("Memories"), " ", h("small", { class: "muted" }, ns)),
    form,
    h("p", { class: "muted" }, searching ? t("Best match first.") : t("Newest first.")),
    table([
      { label: t("Text"), cell: (m) => h("a", { href: `#/memory/${encodeURIComponent(m.id)}`,
        class: "memory-text", testid: "memory-link", lang: m.language === "zh" ? "zh" : null },
      snippet(m.text)) },
      { label: t("Category"), cell: (m) => m.category },
      { label: t("Tier"), cell: (m) => m.tier },
      { label: t("Imp."), cell: (m) => m.importance },
      { label: t("State"), cell: (m) => badges(m) },
      ...(searching ? [{ label: t("Score"), cell: (m) => num(m.score) }] : []),
      // When it was said (the conversation's time), not when the server stored it.
      { label: t("Said"), cell: (m) => h("span", { testid: "memory-said" },
        when(m.time_start || m.created_at)) },
    ], data.items, { testid: "memories", empty: t("No memory matches.") }),
    pager);
}

function snippet(text, max = 160) {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

function badges(m) {
  return h("span", { class: "badges" },
    h("span", { class: `badge state-${m.state}`, testid: "state" }, m.state),
    m.pinned ? h("span", { class: "badge pinned", testid: "pinned-badge" }, "📌 pinned") : null,
    m.protected ? h("span", { class: "badge" }, "protected") : null);
}

// --- one memory --------------------------------------------------------------------------

async function memory(params, id) {
  const [m, evolution, said] = await Promise.all([
    get(`/v1/memories/${encodeURIComponent(id)}`),
    get(`/v1/memories/${encodeURIComponent(id)}/evolution`),
    get(`/v1/memories/${encodeURIComponent(id)}/messages`),
  ]);
  sessionStorage.setItem(NS_KEY, m.namespace);
  const reload = () => go("memory", {}, id);

  const buttons = h("div", { class: "buttons" });
  const pin = h("button", { type: "button", testid: m.pinned ? "unpin" : "pin" },
    m.pinned ? t("Unpin") : t("📌 Pin"));
  pin.addEventListener("click", action(pin, async () => {
    await patch(`/v1/memories/${encodeURIComponent(id)}`, { pinned: !m.pinned });
    toast(m.pinned ? t("Unpinned.") : t("Pinned."));
    reload();
  }));
  buttons.append(pin);
  if (m.state === "active") {
    const forget = h("button", { type: "button", class: "danger", testid: "forget" }, t("Forget"));
    forget.addEventListener("click", action(forget, async () => {
      await post(`/v1/memories/${encodeURIComponent(id)}/forget`);
      toast(t("Forgotten: it leaves recall until restored."));
      reload();
    }));
    buttons.append(forget);
  } else {
    const restore = h("button", { type: "button", testid: "restore" }, t("Restore"));
    restore.addEventListener("click", action(restore, async () => {
      await post(`/v1/memories/${encodeURIComponent(id)}/restore`);
      toast(t("Restored."));
      reload();
    }));
    buttons.append(restore);
  }

  return h("section", { testid: "view-memory" },
    h("p", {}, h("a", { href: `#/memories?ns=${encodeURIComponent(m.namespace)}` },
      `← ${m.namespace}`)),
    h("h1", {}, t("Memory"), " ", h("small", { class: "muted mono" }, m.id)),
    h("div", { class: "two" },
      h("div", { class: "card" },
        h("h2", {}, t("Text")),
        h("pre", { class: "text", testid: "memory-text", lang: m.language === "zh" ? "zh" : null },
          m.text),
        // Conversation time first: when it was said, not when the server stored it.
        h("p", { class: "said", testid: "memory-said" }, `${t("Said")}: `,
          h("time", {}, when(m.time_start)), " – ", h("time", {}, when(m.time_end))),
        h("h2", {}, t("Messages"), ` (${m.msg_count})`),
        messageList(said),
        h("p", { class: "muted", testid: "memory-meta" },
          `${t("Session")} ${m.session_id} · ${t("Branch")} ${m.branch} · ` +
          `${t("Stored")} ${when(m.created_at)}`),
        buttons),
      h("div", { class: "card" },
        h("h2", {}, t("Scores")),
        scored(m) ? null : h("p", { class: "muted", testid: "not-scored" }, "Not scored " +
          "yet: the next compression pass scores each new or edited memory."),
        h("div", { testid: "weights" },
          bar(m.weight.novelty, "novelty"), bar(m.weight.entropy, "entropy"),
          bar(m.weight.task, "task"), bar(m.weight.emotion, "emotion"),
          bar(m.weight.total, "total")),
        h("dl", { class: "facts" },
          h("dt", {}, t("Category")), h("dd", { testid: "category" },
            `${m.category} (${num(m.category_confidence, 2)})`),
          h("dt", {}, t("Importance")), h("dd", {}, m.importance),
          h("dt", {}, t("Tier")), h("dd", {}, m.tier),
          h("dt", {}, t("State")), h("dd", {}, badges(m)),
          h("dt", {}, t("Hits / accesses")), h("dd", {}, `${m.hit_count} / ${m.access_count}`),
          h("dt", {}, t("Tags")), h("dd", {}, m.tags.join(", ") || "—"),
          h("dt", {}, t("Entities")), h("dd", { testid: "entities" }, entities(m.entities)),
          m.summary_of.length ? [h("dt", {}, t("Summary of")), h("dd", {}, m.summary_of.map(
            (s) => h("a", { href: `#/memory/${encodeURIComponent(s)}`, class: "mono" }, s + " ")))]
            : null))),
    h("div", { class: "card" },
      h("h2", {}, t("Evolution")),
      h("ol", { class: "timeline", testid: "timeline" }, evolution.events.map((e) =>
        h("li", { "data-event": e.event },
          h("span", { class: "icon" }, ICONS[e.event] || "•"),
          h("strong", {}, e.event), " ", h("time", {}, when(e.timestamp)),
          e.note ? h("div", { class: "note" }, e.note) : null)))),
    editForm(m, reload));
}

// Who said what and when, as the raw log holds it; ids the log no longer holds are named.
function messageList(said) {
  const rows = said.items.map((msg) => h("li", { "data-msg-id": msg.msg_id },
    h("span", { class: `role role-${msg.role}`, testid: "message-role" }, t(ROLES[msg.role] ||
      msg.role)), " ",
    h("time", { class: "muted", testid: "message-time" }, when(msg.timestamp)),
    h("div", { class: "message-content", testid: "message-content" }, msg.content)));
  const gone = said.missing.map((msgId) => h("li", { class: "muted", "data-msg-id": msgId },
    h("span", { class: "mono" }, msgId), " ", t("(deleted from the log)")));
  return h("ol", { class: "messages", testid: "messages" }, rows, gone);
}

function scored(m) {
  const w = m.weight;
  return w.novelty || w.entropy || w.task || w.emotion || w.total;
}

function entities(map) {
  const parts = Object.entries(map || {}).filter(([, v]) => v.length)
    .map(([kind, values]) => `${kind}: ${values.join(", ")}`);
  return parts.length ? parts.join(" · ") : "—";
}

function editForm(m, reload) {
  const text = h("textarea", { name: "text", rows: 5, testid: "edit-text" }, m.text);
  const tags = h("input", { name: "tags", value: m.tags.join(", "), testid: "edit-tags" });
  const category = h("select", { name: "category", testid: "edit-category" },
    CATEGORIES.map((c) => h("option", { value: c }, c)));
  category.value = m.category;
  const importance = h("input", { name: "importance", type: "number", min: 1, max: 10,
    value: m.importance, testid: "edit-importance" });
  const save = h("button", { type: "submit", testid: "edit-save" }, t("Save"));
  const form = h("form", { class: "card", testid: "edit" }, h("h2", {}, t("Edit")),
    field(t("Text"), text, t("A new text is re-embedded and re-analysed.")),
    h("div", { class: "row" }, field(t("Tags"), tags, t("comma-separated")),
      field(t("Category"), category), field(t("Importance"), importance)), save);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const changes = {};
    if (text.value !== m.text) changes.text = text.value;
    const newTags = tags.value.split(",").map((t) => t.trim()).filter(Boolean);
    if (newTags.join(",") !== m.tags.join(",")) changes.tags = newTags;
    if (category.value !== m.category) changes.category = category.value;
    if (Number(importance.value) !== m.importance) changes.importance = Number(importance.value);
    if (!Object.keys(changes).length) return toast(t("Nothing changed."));
    action(save, async () => {
      await patch(`/v1/memories/${encodeURIComponent(m.id)}`, changes);
      toast(t("Saved."));
      reload();
    })();
  });
  return form;
}

// --- recall playground -------------------------------------------------------------------

async function recall(params) {
  const ns = namespace(params);
  if (!ns) return needNamespace(t("Recall"));
  const query = h("textarea", { name: "query", rows: 2, testid: "recall-query",
    placeholder: t("What the user just said, or a question (中文 or English)") });
  const topK = h("input", { name: "top_k", type: "number", min: 1, max: 100, value: 10,
    testid: "recall-top-k" });
  const maxTokens = h("input", { name: "max_tokens", type: "number", min: 1, max: 32000,
    placeholder: "1500", testid: "recall-max-tokens" });
  const minScore = h("input", { name: "min_score", type: "number", min: 0, max: 1, step: 0.01,
    placeholder: "0.35", testid: "recall-min-score" });
  const language = h("select", { name: "language" },
    ["auto", "zh", "en"].map((l) => h("option", { value: l }, l)));
  const out = h("div", { testid: "recall-result" });
  const form = h("form", { class: "card", testid: "recall-form" },
    field(t("Query"), query),
    h("div", { class: "row" }, field("top_k", topK), field("max_tokens", maxTokens),
      field("min_score", minScore), field(t("Block language"), language)),
    h("button", { type: "submit", testid: "recall-submit" }, t("Recall")));
  const request = () => {
    const body = { namespace: ns, query: query.value, top_k: Number(topK.value) || 10,
      language: language.value };
    if (maxTokens.value) body.max_tokens = Number(maxTokens.value);
    if (minScore.value) body.min_score = Number(minScore.value);
    return body;
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clear(out).append(h("p", { class: "loading" }, t("Recalling…")));
    try {
      const body = request();
      const result = await post("/v1/recall", body);
      clear(out).append(await recallResult(result, body));
    } catch (err) {
      clear(out).append(problem(err));
    }
  });
  return h("section", { testid: "view-recall" },
    h("h1", {}, t("Recall playground"), " ", h("small", { class: "muted" }, ns)),
    h("p", { class: "muted" }, "Runs POST /v1/recall exactly as an assistant would " +
      "(it counts as a hit for the memories it returns)."), form, out);
}

async function recallResult(result, request) {
  const parts = ["relevance", "vector", "keyword", "cosine", "ranking", "decay", "boost"];
  const whyOut = h("div", { testid: "why-not-result" });
  const ask = async (id, button) => {
    try {
      if (button) button.disabled = true;
      const answer = await post("/v1/recall/why_not", { ...request, memory_ids: [id] });
      clear(whyOut).append(whyNot(answer.items[0]));
    } catch (err) {
      clear(whyOut).append(problem(err));
    } finally {
      if (button) button.disabled = false;
    }
  };
  // Memories that did not come back, to ask about: the namespace's best text matches
  // for the query first, then its newest memories, without those recalled.
  const returned = new Set(result.memories.map((m) => m.id));
  const [matches, newest] = await Promise.all([
    get("/v1/memories", { namespace: request.namespace, q: request.query, limit: 20 }),
    get("/v1/memories", { namespace: request.namespace, limit: 30 }),
  ]);
  const seen = new Set();
  const others = [...matches.items, ...newest.items].filter((m) => {
    if (returned.has(m.id) || seen.has(m.id)) return false;
    seen.add(m.id);
    return true;
  });
  const idInput = h("input", { name: "memory_id", placeholder: "memory id",
    testid: "why-not-id" });
  const askButton = h("button", { type: "submit", testid: "why-not-submit" }, t("Why not?"));
  const askForm = h("form", { class: "row" }, field(t("Any memory id"), idInput), askButton);
  askForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (idInput.value.trim()) ask(idInput.value.trim(), askButton);
  });

  return h("div", {},
    h("div", { class: "card" },
      h("h2", {}, t("Injection block")),
      h("p", { class: "muted", testid: "recall-stats" },
        `${result.count} memories · ${result.tokens}/${result.max_tokens} tokens · block ` +
        `${result.block_tokens} tokens · threshold ${num(result.min_score)} · ` +
        `${result.candidates} candidates · language ${result.language} · ${result.took_ms} ms`),
      result.block ? h("pre", { class: "block", testid: "recall-block" }, result.block)
        : h("p", { class: "empty", testid: "recall-block-empty" }, "Nothing recalled: the " +
          "block is empty.")),
    h("div", { class: "card" },
      h("h2", {}, t("Recalled memories and their score parts")),
      table([
        { label: t("Memory"), cell: (m) => h("a", { href: `#/memory/${encodeURIComponent(m.id)}`,
          testid: "recalled-link" }, snippet(m.text, 100)) },
        { label: t("Score"), cell: (m) => h("span", { testid: "explain-score" }, num(m.score)) },
        ...parts.map((p) => ({ label: p, cell: (m) => h("span", { testid: `explain-${p}` },
          num(m.explain[p])) })),
        { label: t("Layer"), cell: (m) => m.layer },
        { label: t("Tokens"), cell: (m) => m.tokens },
      ], result.memories, { testid: "recalled", empty: t("No memory passed.") })),
    h("div", { class: "card" },
      h("h2", {}, t("Why not this memory?")),
      askForm,
      table([
        { label: t("Not recalled"), cell: (m) => h("a", { href: `#/memory/${encodeURIComponent(m.id)}` },
          snippet(m.text, 100)) },
        { label: t("State"), cell: (m) => m.state },
        { label: "", cell: (m) => {
          const b = h("button", { type: "button", class: "small", testid: "why-not-button",
            "data-memory-id": m.id }, t("Why not?"));
          b.addEventListener("click", () => ask(m.id, b));
          return b;
        } },
      ], others, { testid: "not-recalled", empty: t("Every listed memory was recalled.") }),
      whyOut));
}

function whyNot(item) {
  const e = item.explain;
  return h("div", { class: `verdict verdict-${item.verdict}`, testid: "why-not" },
    h("p", {}, h("strong", { testid: "why-not-verdict" }, item.verdict.replace(/_/g, " ")),
      ": ", h("span", { testid: "why-not-reason" }, item.reason)),
    h("p", { class: "muted mono" }, item.memory_id),
    e ? h("dl", { class: "facts" },
      ["relevance", "vector", "keyword", "cosine", "ranking", "decay", "boost"].map((p) =>
        [h("dt", {}, p), h("dd", {}, num(e[p]))]),
      h("dt", {}, "threshold"), h("dd", {}, num(item.min_score))) : null);
}

// --- compression -------------------------------------------------------------------------

async function compression(params) {
  const ns = namespace(params);
  if (!ns) return needNamespace(t("Compression"));
  const [status, policy] = await Promise.all([
    get("/v1/compression/status"),
    get(`/v1/compression/policies/${encodeURIComponent(ns)}`),
  ]);
  const last = status.namespaces[ns] || null;
  const dryOut = h("div", { testid: "dry-run-result" });
  const dry = h("button", { type: "button", testid: "dry-run" }, t("Dry run now"));
  dry.addEventListener("click", action(dry, async () => {
    const result = await post("/v1/compression/run", { namespace: ns, dry_run: true,
      force: true });
    const mine = result.namespaces.find((r) => r.namespace === ns);
    clear(dryOut).append(mine ? passSummary(mine, t("Dry run (nothing changed)"))
      : h("p", {}, t("No result.")));
  }));
  return h("section", { testid: "view-compression" },
    h("h1", {}, t("Compression"), " ", h("small", { class: "muted" }, ns)),
    h("div", { class: "two" },
      h("div", { class: "card" },
        h("h2", {}, t("Scheduler")),
        h("dl", { class: "facts" },
          h("dt", {}, t("Enabled")), h("dd", {}, String(status.enabled)),
          h("dt", {}, t("Passes since start")), h("dd", {}, status.passes),
          h("dt", {}, t("Running")), h("dd", {}, String(status.running)),
          h("dt", {}, t("Next run")), h("dd", {}, when(status.next_run_at)))),
      h("div", { class: "card" },
        h("h2", {}, t("Policy")),
        h("dl", { class: "facts", testid: "policy" },
          h("dt", {}, t("Preset")), h("dd", {}, policy.config.preset +
            (policy.chosen ? "" : " (from settings)")),
          h("dt", {}, t("Shadow")), h("dd", {}, policy.config.shadow
            ? policy.config.shadow.preset : "none"),
          h("dt", {}, t("Threshold")), h("dd", {}, num(policy.live.base_threshold, 2)),
          h("dt", {}, t("Hit rate")), h("dd", {}, num(policy.feedback.hit_rate))))),
    h("div", { class: "card", testid: "last-pass" },
      last ? passSummary(last, `Latest pass · ${when(last.started_at)}`)
        : h("p", { class: "empty" }, "No pass has run for this namespace since the server " +
          "started."),
      dry, dryOut),
    await compressedMemories(ns));
}

function passSummary(r, title) {
  const decisions = Object.entries(r.decisions).map(([k, v]) => `${k} ${v}`).join(" · ");
  return h("div", { testid: "pass" },
    h("h2", {}, title),
    r.ok ? null : h("p", { class: "error" }, r.error),
    h("p", {}, `policy ${r.policy} · ${r.memories} memories · ${r.compressed.length} compressed ` +
      `· ${r.summaries.length} summaries · pressure ${num(r.pressure, 2)} → ` +
      `${num(r.pressure_after, 2)} · ${num(r.seconds, 2)} s`),
    h("p", { class: "muted" }, decisions || "no decisions"),
    r.shadow ? h("div", { testid: "shadow-report" },
      h("h3", {}, `Shadow policy ${r.shadow.policy}`),
      h("p", {}, `${r.shadow.differing} decisions differ · would compress ` +
        `${r.shadow.would_compress} now · ` + Object.entries(r.shadow.by_pair)
        .map(([k, v]) => `${k}: ${v}`).join(", ")),
      table([
        { label: t("Memory"), cell: (d) => h("a", { href: `#/memory/${encodeURIComponent(d.memory_id)}`,
          class: "mono" }, d.memory_id) },
        { label: t("Live"), cell: (d) => `${d.live} (${num(d.live_score, 2)})` },
        { label: t("Shadow"), cell: (d) => `${d.shadow} (${num(d.shadow_score, 2)})` },
      ], r.shadow.examples, { empty: t("No differing decision.") }))
      : h("p", { class: "muted", testid: "no-shadow" }, "No shadow policy: choose one with " +
        "PUT /v1/compression/policies/{namespace}."));
}

async function compressedMemories(ns) {
  // Admin keys see each original's archived text beside its compressed form (the debug
  // dump); other keys see the compressed forms, which restore brings back whole.
  let rows;
  let originals = true;
  try {
    const dump = await post("/debug/memory_dump", { namespace: ns, state: "compressed",
      compress_level: 2, limit: 200 });
    rows = dump.items;
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 403)) throw err;
    originals = false;
    const list = await get("/v1/memories", { namespace: ns, state: "compressed", limit: 200 });
    rows = list.items.map((m) => ({ id: m.id, compressed: m.text, original: null,
      summarized_by: null }));
  }
  const restoreCell = (row) => {
    const b = h("button", { type: "button", class: "small", testid: "restore-compressed",
      "data-memory-id": row.id }, t("Restore"));
    b.addEventListener("click", action(b, async () => {
      await post(`/v1/memories/${encodeURIComponent(row.id)}/restore`);
      toast(t("Restored whole from the archive."));
      go("compression", { ns });
    }));
    return b;
  };
  return h("div", { class: "card" },
    h("h2", {}, `Compressed memories (${rows.length})`),
    originals ? null : h("p", { class: "muted" }, t("Originals are shown to admin keys only.")),
    table([
      { label: t("Memory"), cell: (r) => h("a", { href: `#/memory/${encodeURIComponent(r.id)}`,
        class: "mono" }, r.id) },
      ...(originals ? [{ label: t("Original"), cell: (r) => h("pre", { class: "text" },
        r.original || "—") }] : []),
      { label: t("Compressed"), cell: (r) => h("pre", { class: "text" }, r.compressed || "—") },
      { label: t("Summary"), cell: (r) => r.summarized_by ? h("a", {
        href: `#/memory/${encodeURIComponent(r.summarized_by)}`, class: "mono" },
      r.summarized_by) : "—" },
      { label: "", cell: restoreCell },
    ], rows, { testid: "compressed", empty: t("Nothing compressed in this namespace.") }));
}

document.getElementById("lang").addEventListener("click", (event) => {
  setLanguage(event.currentTarget.dataset.lang);
  render();
});

window.addEventListener("hashchange", render);
applyStaticText();
render();
