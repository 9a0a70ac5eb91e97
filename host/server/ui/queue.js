// Queue view: pending jobs in priority order (tier, then the priority stage's score,
// then age) with the reason each waits and its expected start (the controller's
// forecast: a bar from now to the median start, its 90th percentile in the title; an
// array member reads `2_1` as the CLI names it), and running jobs with elapsed time against
// their limit; filters by user, account and queue (sent to the API as query
// parameters). Both lists are virtualised; reloaded every 30 s besides the stream, as
// elapsed times move on.

import { api } from "./api.js";
import { h, fill, card, duration, gpuAsk, jobLink } from "./dom.js";
import { VirtualList } from "./vlist.js";

const ROW = 33; // .tr height + border

/** Pending jobs in the order the scheduler considers them. */
export function priorityOrder(jobs) {
  return [...jobs].sort((a, b) => b.tier - a.tier || b.score - a.score || a.id - b.id);
}

/** `2_1` for an array member (as `gantry jobs` names it), else the id. */
export function displayId(j) {
  return j.array ? `${j.array.array_id}_${j.array.index}` : `${j.id}`;
}

/** The time until `ms`, as the bar's label: "now", "in 45 s", "in 40 min", "in 3.5 h", "in 2 d". */
function until(ms, now) {
  const s = (ms - now) / 1000;
  if (s <= 0) return "now";
  if (s < 60) return `in ${Math.ceil(s)} s`;
  if (s < 7200) return `in ${Math.round(s / 60)} min`;
  if (s < 172800) return `in ${(s / 3600).toFixed(1)} h`;
  return `in ${Math.round(s / 86400)} d`;
}

/** The expected start: a bar from now to the forecast's median (a full bar is a day). */
function startCell(j, now) {
  const f = j.start_forecast;
  if (!f) return h("span", { class: "start", "data-testid": `start-${j.id}` }, "not forecast yet");
  if (f.p50_ms == null) {
    return h("span", { class: "start", title: f.reason, "data-testid": `start-${j.id}` }, f.reason);
  }
  const width = Math.min(100, Math.max(2, ((f.p50_ms - now) / 86400000) * 100));
  const p90 = f.p90_ms != null ? new Date(f.p90_ms).toLocaleString() : "not within 30 days";
  return h("span", {
    class: "start", "data-testid": `start-${j.id}`,
    title: `${new Date(f.p50_ms).toLocaleString()} (90 %: by ${p90}): ${f.reason}`,
  }, h("span", { class: "bar", style: `width:${width}%` }), ` ${until(f.p50_ms, now)}`);
}

function pendingRow(j, i) {
  const r = j.reason;
  const link = jobLink(j.id);
  link.textContent = `#${displayId(j)}`;
  return h("div", { class: "tr pending-cols", "data-testid": `pending-${j.id}` },
    link, h("span", { class: "wide" }, i + 1), h("span", { title: j.spec.name }, j.spec.name),
    h("span", {}, j.spec.user), h("span", { class: "wide" }, j.spec.account), h("span", { class: "wide" }, j.spec.queue),
    h("span", { class: "wide" }, gpuAsk(j.spec)),
    startCell(j, Date.now()),
    h("span", { title: r ? `${r.stage}/${r.plugin}: ${r.message}` : "", "data-testid": `reason-${j.id}` },
      r ? `${r.code}: ${r.message}` : "not yet considered"));
}

function runningRow(j, now) {
  const elapsed = j.start_ms ? now - j.start_ms : null;
  const limit = j.spec.time_limit_s ? j.spec.time_limit_s * 1000 : 0;
  const gpus = j.tasks.flatMap((t) => t.gpus.map((g) => `${t.node}:${g.index}${g.milli < 1000 ? `(${g.milli}m)` : ""}`));
  return h("div", { class: "tr running-cols", "data-testid": `running-${j.id}` },
    jobLink(j.id), h("span", { title: j.spec.name }, j.spec.name), h("span", {}, j.spec.user),
    h("span", { class: "wide" }, j.spec.account), h("span", { class: "wide" }, j.spec.queue),
    h("span", {}, `${duration(elapsed)} / ${limit ? duration(limit) : "no limit"}`),
    h("span", { title: gpus.join(" ") }, gpus.join(" ") || "no GPU"));
}

function header(cols, names) {
  const shown = ["Reason", "Elapsed / limit", "GPUs", "Starts"];
  return h("div", { class: `tr th ${cols}` }, names.map((n, i) => h("span", { class: i > 3 && !shown.includes(n) ? "wide" : "" }, n)));
}

export function queueView() {
  const filters = { user: "", account: "", queue: "" };
  const inputs = Object.keys(filters).map((k) => h("input", {
    placeholder: k, "aria-label": `filter by ${k}`, "data-testid": `filter-${k}`,
    onchange: (e) => { filters[k] = e.target.value.trim(); view.load(); },
  }));
  const pendingList = new VirtualList(ROW, pendingRow, "45vh");
  const runningList = new VirtualList(ROW, (j) => runningRow(j, Date.now()), "35vh");
  const pendingTitle = h("h2", {}, "Pending");
  const runningTitle = h("h2", {}, "Running");
  const el = h("div", {},
    h("div", { class: "filters" }, inputs),
    h("div", { class: "card" }, pendingTitle,
      header("pending-cols", ["Job", "#", "Name", "User", "Account", "Queue", "Asks", "Starts", "Reason"]), pendingList.el),
    h("div", { class: "card" }, runningTitle,
      header("running-cols", ["Job", "Name", "User", "Account", "Queue", "Elapsed / limit", "GPUs"]), runningList.el));
  const view = {
    el,
    parts: ["jobs"],
    every: 30000, // elapsed times move on even when nothing changes
    async load() {
      const q = Object.entries(filters).filter(([, v]) => v).map(([k, v]) => `&${k}=${encodeURIComponent(v)}`).join("");
      const [pending, running] = await Promise.all([
        api(`/v1/jobs?state=pending&limit=1000000${q}`),
        api(`/v1/jobs?state=running&limit=1000000${q}`),
      ]);
      fill(pendingTitle, `Pending (${pending.length})`);
      fill(runningTitle, `Running (${running.length})`);
      pendingList.set(priorityOrder(pending));
      runningList.set(running.sort((a, b) => a.start_ms - b.start_ms));
    },
  };
  return view;
}
