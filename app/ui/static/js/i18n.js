// The page's words in the reader's language. The strings are data (strings.json: English
// text -> translation, one table per language); English is the key itself, so a string
// missing from a table still shows, in English. The language follows the browser's
// preferred languages until the reader picks one with the switch (kept in localStorage:
// a preference, not a secret).

const CHOICE = "engram.lang";
export const LANGUAGES = ["en", "zh"];

const tables = await fetch(new URL("../strings.json", import.meta.url))
  .then((response) => (response.ok ? response.json() : {}))
  .catch(() => ({}));

function preferred() {
  const chosen = localStorage.getItem(CHOICE);
  if (LANGUAGES.includes(chosen)) return chosen;
  for (const tag of navigator.languages || [navigator.language || "en"]) {
    const base = String(tag).toLowerCase().split("-")[0];
    if (LANGUAGES.includes(base)) return base;
  }
  return "en";
}

export let language = preferred();

export function setLanguage(lang) {
  if (!LANGUAGES.includes(lang)) return;
  localStorage.setItem(CHOICE, lang);
  language = lang;
  applyStaticText();
}

// The translation of `text`, its {placeholders} filled from `values`.
export function t(text, values = {}) {
  const table = tables[language] || {};
  const template = language === "en" ? text : (table[text] ?? text);
  return template.replace(/\{(\w+)\}/g, (all, name) => (name in values ? String(values[name])
    : all));
}

// The fixed parts of index.html carry their English text in data-i18n.
export function applyStaticText() {
  document.documentElement.lang = language === "zh" ? "zh-CN" : "en";
  document.title = t("Engram · memory inspector");
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  const other = language === "zh" ? "en" : "zh";
  const button = document.getElementById("lang");
  if (button) {
    button.textContent = other === "zh" ? "中文" : "English";
    button.lang = other === "zh" ? "zh-CN" : "en";
    button.dataset.lang = other;
  }
}
