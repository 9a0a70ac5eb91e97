// Queue view: pending jobs in priority order (tier, then the priority stage's score,
// then age) with the reason each waits, and running jobs with elapsed time against
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

function pendingRow(j, i) {
  const r = j.reason;
  return h("div", { class: "tr pending-cols", "data-testid": `pending-${j.id}` },
    jobLink(j.id), h("span", { class: "wide" }, i + 1), h("span", { title: j.spec.name }, j.spec.name),
    h("span", {}, j.spec.user), h("span", { class: "wide" }, j.spec.account), h("span", { class: "wide" }, j.spec.queue),
    h("span", { class: "wide" }, gpuAsk(j.spec)),
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
  return h("div", { class: `tr th ${cols}` }, names.map((n, i) => h("span", { class: i > 3 && n !== "Reason" && n !== "Elapsed / limit" && n !== "GPUs" ? "wide" : "" }, n)));
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
      header("pending-cols", ["Job", "#", "Name", "User", "Account", "Queue", "Asks", "Reason"]), pendingList.el),
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
