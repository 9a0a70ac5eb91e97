// Usage view: GPU-hours per account and per user over time (stacked bars per day, or
// per hour when the records span under two days) from `GET /v1/accounting`, and the
// fair-share standing (decayed GPU usage, `GET /v1/fairshare`). A `user` token sees its
// own records only; the API decides that.

import { api } from "./api.js";
import { h, fill, card, problem } from "./dom.js";
import { stackedBars, hBars } from "./chart.js";

/** GPU-hours for people: two decimals, or two significant digits when smaller. */
const gpuHours = (x) => (x === 0 || x >= 0.01 ? x.toFixed(2) : x.toPrecision(2));

const HOUR = 3600e3, DAY = 24 * HOUR;

/** Buckets of GPU-hours per `key` (user or account) over the records' time span. */
export function overTime(records, key) {
  if (!records.length) return { buckets: [], series: [] };
  const from = Math.min(...records.map((r) => r.start_ms));
  const to = Math.max(...records.map((r) => r.end_ms));
  const step = to - from < 2 * DAY ? HOUR : DAY;
  const first = Math.floor(from / step) * step;
  const n = Math.min(400, Math.floor((to - first) / step) + 1);
  const buckets = Array.from({ length: n }, (_, i) => {
    const d = new Date(first + i * step);
    const label = step === HOUR ? `${d.getHours()}:00` : `${d.getMonth() + 1}/${d.getDate()}`;
    return { label, values: new Map() };
  });
  const totals = new Map();
  for (const r of records) {
    const gpuH = r.gpu_milli_seconds / 1000 / 3600;
    const who = r[key];
    totals.set(who, (totals.get(who) || 0) + gpuH);
    // Spread the record over the buckets it spans, by time.
    const span = Math.max(1, r.end_ms - r.start_ms);
    for (let t = Math.floor(r.start_ms / step) * step; t <= r.end_ms; t += step) {
      const i = Math.round((t - first) / step);
      if (i < 0 || i >= n) continue;
      const part = Math.max(0, Math.min(r.end_ms, t + step) - Math.max(r.start_ms, t)) / span;
      const m = buckets[i].values;
      m.set(who, (m.get(who) || 0) + gpuH * (r.end_ms === r.start_ms ? 1 : part));
    }
  }
  const series = [...totals.entries()].sort((a, b) => b[1] - a[1]).map(([k]) => k);
  return { buckets, series };
}

export function usageView() {
  const byAccount = h("div", { class: "chart", "data-testid": "usage-accounts" });
  const byUser = h("div", { class: "chart", "data-testid": "usage-users" });
  const fair = h("div", { "data-testid": "fairshare" });
  const note = h("p", { class: "mute" });
  const el = h("div", {}, note,
    card("GPU-hours per account", byAccount), card("GPU-hours per user", byUser),
    card("Fair-share standing (decayed GPU usage; less used → higher priority)", fair));
  return {
    el,
    parts: ["jobs"],
    async load() {
      const [acc, fs] = await Promise.allSettled([api("/v1/accounting?limit=100000"), api("/v1/fairshare")]);
      if (acc.status === "fulfilled") {
        const rep = acc.value;
        fill(note, `${rep.total.records} task runs, ${gpuHours(rep.total.gpu_hours)} GPU-hours in all`,
          rep.truncated ? " (chart over the newest 100,000 runs)" : "", ". Running tasks count once they end.");
        for (const [el2, key] of [[byAccount, "account"], [byUser, "user"]]) {
          const { buckets, series } = overTime(rep.records, key);
          fill(el2, buckets.length ? stackedBars(buckets, series, { unit: "GPU-h" }) : h("p", { class: "mute" }, "No finished task runs yet."));
        }
      } else fill(note, problem(acc.reason));
      if (fs.status === "fulfilled") {
        const f = fs.value;
        const half = f.half_life_s / 86400;
        const rows = (list) => list.slice(0, 30).map((r) => ({
          label: r.name, value: r.gpu_seconds, note: `${gpuHours(r.gpu_seconds / 3600)} GPU-h · ${(r.share * 100).toFixed(1)}%` }));
        fill(fair, h("p", { class: "mute" }, `Half-life ${half >= 1 ? `${half.toFixed(1)} days` : `${f.half_life_s} s`}; cluster total ${gpuHours(f.total_gpu_seconds / 3600)} decayed GPU-h.`),
          h("div", { class: "grid2" },
            h("div", {}, h("h3", {}, "Accounts"), f.accounts.length ? hBars(rows(f.accounts)) : h("p", { class: "mute" }, "none")),
            h("div", {}, h("h3", {}, "Users"), f.users.length ? hBars(rows(f.users)) : h("p", { class: "mute" }, "none"))));
      } else fill(fair, problem(fs.reason));
    },
  };
}
