// A tiny DOM builder. Memory texts are user content: everything goes in as text nodes,
// never as HTML, so a memory that looks like markup stays text.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "testid") {
      el.dataset.testid = value;
    } else if (key === "value") {
      el.value = value;
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function when(value) {
  if (!value) return "—";
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

export function num(value, digits = 3) {
  return typeof value === "number" ? value.toFixed(digits) : "—";
}

export function field(label, control, hint) {
  return h("label", { class: "field" }, h("span", {}, label), control,
           hint ? h("small", {}, hint) : null);
}

export function table(columns, rows, { testid, empty = "Nothing here." } = {}) {
  if (!rows.length) return h("p", { class: "empty", testid }, empty);
  return h("table", { class: "grid", testid },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c.label)))),
    h("tbody", {}, rows.map((row) => h("tr", {},
      columns.map((c) => h("td", { "data-label": c.label }, c.cell(row)))))));
}

export function bar(value, label) {
  const pct = Math.max(0, Math.min(1, Number(value) || 0)) * 100;
  const fill = h("span", { class: "bar-fill" });
  fill.style.width = `${pct}%`;  // through the CSSOM: the page's CSP allows no inline styles
  return h("div", { class: "bar", title: `${label}: ${num(value)}` },
    h("span", { class: "bar-label" }, label),
    h("span", { class: "bar-track" }, fill),
    h("span", { class: "bar-value" }, num(value)));
}
