// Services view: every replicated service (`GET /v1/services`), running ones first, then
// stopped ones: its endpoint port, replicas wanted and ready, current revision and the
// last rolling update, each replica (job, state, node, port, health, restarts, revision,
// draining), and for an autoscaled one a chart of the autoscaler's recent readings (the
// metric summed over ready replicas, and the replicas wanted after each).
//
// Refresh: a replica's job changing shows on the stream (`jobs`); health checks and the
// autoscaler's readings do not, so the view also asks to be reloaded every few seconds
// (`every`, run by app.js while the view is shown).

import { api } from "./api.js";
import { h, fill, card, ago, jobLink, table } from "./dom.js";
import { twoLines } from "./chart.js";

/** Running services first, then stopped ones; oldest (lowest id) first within each. */
export function serviceOrder(services) {
  return [...services].sort((a, b) => Number(a.stopped) - Number(b.stopped) || a.id - b.id);
}

/** A replica takes requests: running, healthy or without a check, not draining. */
export function isReady(r) {
  return r.state === "running" && !r.draining && (!r.health || r.health === "healthy" || r.health === "unchecked");
}

function badge(text, kind) {
  return h("span", { class: `badge ${kind}` }, text);
}

function rolloutNote(svc) {
  const r = svc.rollout;
  if (!r) return h("span", { class: "mute" }, "no rolling update yet");
  const since = r.ended_ms ? `ended ${ago(r.ended_ms)}` : `since ${ago(r.started_ms)}`;
  const kind = r.state === "complete" ? "healthy" : r.state === "rolled-back" ? "unhealthy" : "starting";
  return h("span", { "data-testid": `rollout-${svc.id}` }, `update ${r.from} → ${r.to} `, badge(r.state, kind), ` ${since}`);
}

function replicaRows(svc) {
  if (!svc.replica_jobs.length) return h("p", { class: "mute" }, svc.stopped ? "Stopped: no replica runs." : "No replica yet.");
  return table(["Job", "State", "Node", "Port", "Health", "Restarts", "Revision", ""], svc.replica_jobs.map((r) => [
    jobLink(r.job),
    h("span", { title: r.reason || "" }, r.state, r.reason ? h("span", { class: "mute" }, `: ${r.reason}`) : ""),
    r.node || "–",
    r.port ?? "–",
    r.health ? badge(r.health, r.health) : h("span", { class: "mute" }, "–"),
    r.restarts,
    r.revision === svc.revision ? r.revision : h("span", { title: `current is ${svc.revision}` }, `${r.revision} (old)`),
    r.draining ? badge("draining", "starting") : "",
  ]), { "data-testid": `replicas-${svc.id}` });
}

function scaleChart(svc) {
  const a = svc.autoscale;
  const note = h("p", { class: "mute" },
    `Autoscaled on ${a.metric}: target ${a.target} per replica, ${a.min_replicas}–${a.max_replicas} replicas, read every ${a.period_s ?? 15} s.`);
  const samples = svc.scale_samples || [];
  const chart = samples.length
    ? twoLines(samples.map((x) => ({ t: x.t_ms, a: x.value, b: x.replicas })),
      { name: `${a.metric} (sum over ready)` }, { name: "replicas wanted", max: a.max_replicas })
    : h("p", { class: "mute" }, "No readings yet (no ready replica answered its metric).");
  return h("div", { class: "chart", "data-testid": `scale-chart-${svc.id}`, "data-samples": samples.length }, note, chart);
}

function serviceCard(svc) {
  const ready = svc.replica_jobs.filter(isReady).length;
  const current = (svc.history || []).find((r) => r.revision === svc.revision);
  return h("div", { class: `card service${svc.stopped ? " stopped" : ""}`, "data-testid": `service-${svc.id}` },
    h("h2", {}, h("span", { "data-testid": `service-name-${svc.id}` }, svc.name), " ",
      h("span", { class: "mute" }, `#${svc.id}`), " ", svc.stopped ? badge("stopped", "stopped") : ""),
    h("div", { class: "row" },
      h("span", {}, "Endpoint ", svc.endpoint_port ? h("code", {}, `:${svc.endpoint_port}`) : h("span", { class: "mute" }, "none")),
      h("span", { "data-testid": `service-replicas-${svc.id}` }, h("b", {}, `${ready}/${svc.replicas}`), " replicas ready"),
      h("span", {}, `revision ${svc.revision}`, current && current.change ? h("span", { class: "mute" }, ` (${current.change})`) : ""),
      rolloutNote(svc),
      h("span", { class: "mute" }, `surge ${svc.strategy.max_surge}, unavailable ${svc.strategy.max_unavailable}, deadline ${svc.strategy.progress_deadline_s} s`)),
    svc.last_error ? h("p", { class: "error" }, svc.last_error) : "",
    replicaRows(svc),
    svc.autoscale ? scaleChart(svc) : "");
}

export function servicesView() {
  const status = h("p", { class: "mute" });
  const list = h("div", { "data-testid": "services" });
  const el = h("div", {}, card("Services", status), list);
  return {
    el,
    parts: ["jobs"],
    every: 5000,
    async load() {
      const services = serviceOrder(await api("/v1/services"));
      const running = services.filter((s) => !s.stopped).length;
      fill(status, services.length
        ? `${running} running service(s), ${services.length - running} stopped.`
        : "No services (gantry service create, or POST /v1/services).");
      fill(list, services.map(serviceCard));
    },
  };
}
