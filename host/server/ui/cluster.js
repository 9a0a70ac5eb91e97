// Cluster view: every node as one (virtual) row of GPU tiles — free, partly used (the
// milli share, drawn as a fill), used (by whom, which job, since when), unhealthy, on a
// drained node — and totals per GPU model.

import { api } from "./api.js";
import { h, fill, card, ago, jobLink } from "./dom.js";
import { VirtualList } from "./vlist.js";

const ROW = 77; // .node height + border

/** The state of one GPU tile. */
function gpuState(gpu) {
  if (!gpu.healthy) return "unhealthy";
  const slices = gpu.mig_slices || [];
  if (slices.length) {
    const held = slices.filter((m) => m.allocated_milli > 0).length;
    return held === slices.length ? "used" : held > 0 ? "part" : "free";
  }
  if (gpu.allocated_milli >= 1000) return "used";
  if (gpu.allocated_milli > 0) return "part";
  return "free";
}

function tile(node, gpu, jobs) {
  const state = gpuState(gpu);
  const holders = gpu.jobs.map(([id, milli]) => {
    const j = jobs.get(id);
    return h("div", {}, jobLink(id), " ", j ? j.spec.user : "", milli < 1000 ? ` ${milli}m` : "",
      j && j.start_ms ? h("span", { class: "mute" }, ` ${ago(j.start_ms)}`) : "");
  });
  const label = state === "unhealthy"
    ? (gpu.health && gpu.health.reason) || "unhealthy"
    : state === "free" ? "free" : `${gpu.allocated_milli}/1000 m`;
  const attrs = {
    class: `gpu ${state}${node.state !== "up" ? " drained" : ""}`,
    "data-testid": `gpu-${node.name}-${gpu.index}`,
    "data-state": state,
    "data-jobs": gpu.jobs.map(([id]) => id).join(","),
    title: `${node.name} GPU ${gpu.index} (${gpu.model}, ${Math.round(gpu.memory_mib / 1024)} GiB)${gpu.uuid ? " " + gpu.uuid : ""}`,
  };
  if (state === "part") attrs.style = `--fill: ${gpu.allocated_milli / 10}%`;
  // A GPU in MIG mode: each slice, its profile and who holds it.
  const slices = (gpu.mig_slices || []).map((m) => h("div", { "data-testid": `mig-${node.name}-${m.index}` },
    h("span", { class: "mute" }, `${m.profile} `),
    ...(m.jobs.length ? m.jobs.map(([id]) => {
      const j = jobs.get(id);
      return h("span", {}, jobLink(id), j ? ` ${j.spec.user} ` : " ");
    }) : ["free"])));
  return h("div", attrs, h("b", {}, `GPU ${gpu.index}`), " ", h("span", { class: "mute" }, gpu.model),
    h("div", {}, slices.length ? "MIG" : label), ...holders, ...slices);
}

function nodeRow(node, jobs) {
  const why = node.down_reason || (node.drain ? node.drain.reason : "");
  const stateNote = node.state === "up" ? "" : `${node.state}${why ? ": " + why : ""}`;
  return h("div", { class: "node", "data-testid": `node-${node.name}` },
    h("div", { class: "node-name", title: stateNote || node.name }, h("b", {}, node.name),
      h("small", {}, node.state), stateNote ? h("small", {}, node.drain ? `by ${node.drain.by || "?"}` : "") : ""),
    h("div", { class: "gpus" }, node.gpus.map((g) => tile(node, g, jobs))));
}

/** Totals per GPU model: free, partly used, used, unhealthy, and GPUs in all. */
export function totalsByModel(nodes) {
  const by = new Map();
  for (const n of nodes) for (const g of n.gpus) {
    const t = by.get(g.model) || { model: g.model, total: 0, free: 0, part: 0, used: 0, unhealthy: 0, milli: 0 };
    t.total += 1;
    t[gpuState(g)] += 1;
    t.milli += g.allocated_milli;
    by.set(g.model, t);
  }
  return [...by.values()].sort((a, b) => a.model.localeCompare(b.model));
}

export function clusterView() {
  const totals = h("div", { class: "totals", "data-testid": "gpu-totals" });
  const list = new VirtualList(ROW, (item) => nodeRow(item.node, item.jobs), "calc(100vh - 15rem)");
  const status = h("p", { class: "mute" });
  const el = h("div", {},
    card("GPUs per model", totals, h("p", { class: "legend mute" },
      h("span", { class: "gpu free" }, "free"), h("span", { class: "gpu part", style: "--fill:50%" }, "partly used"),
      h("span", { class: "gpu used" }, "used"), h("span", { class: "gpu unhealthy" }, "unhealthy"),
      h("span", { class: "gpu drained" }, "drained node"))),
    card("Nodes", status, list.el));
  return {
    el,
    parts: ["nodes", "jobs"],
    async load() {
      const [nodes, running] = await Promise.all([
        api("/v1/nodes"),
        api("/v1/jobs?state=running&limit=1000000"),
      ]);
      const jobs = new Map(running.map((j) => [j.id, j]));
      fill(totals, totalsByModel(nodes).map((t) => h("div", { class: "total", "data-testid": `model-${t.model}` },
        h("b", {}, t.model), ` ${t.free} free · ${t.part} partly · ${t.used} used`,
        t.unhealthy ? ` · ${t.unhealthy} unhealthy` : "", ` of ${t.total} (${(t.milli / 1000).toFixed(1)} GPUs allocated)`)));
      const gpus = nodes.reduce((n, x) => n + x.gpus.length, 0);
      fill(status, `${nodes.length} node(s), ${gpus} GPU(s), ${running.length} running job(s)`);
      list.set(nodes.map((node) => ({ node, jobs })));
    },
  };
}
