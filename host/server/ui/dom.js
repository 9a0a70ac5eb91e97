// Small DOM and formatting helpers shared by the views. Text always goes in as text
// nodes (never innerHTML), so job names and reasons cannot inject markup.

/** Creates an element: `h("a", {href: "#", class: "x", onclick}, "text", child)`. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** "3h 12m", "45s". */
export function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

/** Local date and time of a ms timestamp. */
export function when(ms) {
  return ms ? new Date(ms).toLocaleString() : "–";
}

/** "5m ago". */
export function ago(ms) {
  return ms ? `${duration(Date.now() - ms)} ago` : "–";
}

/** GPUs a job asks for, e.g. "2×1 GPU", "0.5 GPU". */
export function gpuAsk(spec) {
  return (spec.tasks || [])
    .map((t) => {
      const each = t.gpus ? `${t.gpus} GPU` : t.gpu_milli ? `${t.gpu_milli / 1000} GPU` : "no GPU";
      return t.count > 1 ? `${t.count}×${each}` : each;
    })
    .join(" + ");
}

/** A job link. */
export function jobLink(id) {
  return h("a", { href: `#/job/${id}`, "data-testid": `job-link-${id}` }, `#${id}`);
}

/** A card with a heading. */
export function card(title, ...children) {
  return h("div", { class: "card" }, h("h2", {}, title), ...children);
}

/** A message for a failed load: a 403 names what the role may not see. */
export function problem(e) {
  return h("p", { class: "error", role: "alert" }, e && e.message ? e.message : String(e));
}

/** A plain table from `rows` (arrays of cells). */
export function table(head, rows, attrs = {}) {
  return h("table", attrs, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))));
}
