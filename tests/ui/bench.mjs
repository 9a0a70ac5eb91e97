// Benchmark of the dashboard with a large synthetic cluster: 1,000 nodes × 8 GPUs and
// 10,000 jobs (6,000 running, 4,000 pending). The page and its files come from a real
// daemon at URL; its data routes (/v1/nodes, /v1/jobs, /v1/whoami) are answered by
// page.route with generated JSON, and /v1/stream is refused, so the only loads are the
// ones measured. A live update is a change to 200 jobs and their GPUs, announced through
// window.gantry.changed (the entry the stream calls).
//
//   node tests/ui/bench.mjs URL [REPEATS]
//
// Prints, per view, the median and worst time to first render (navigation start to the
// first frame after the DOM holds the data) and to a live update (the change announced
// to the frame after the DOM holds the new data), plus the payload sizes.

import { chromium } from "playwright-core";

const [url, repeatsArg] = process.argv.slice(2);
if (!url) { console.error("usage: node bench.mjs URL [REPEATS]"); process.exit(2); }
const REPEATS = Number(repeatsArg || 5);
const NODES = 1000, GPUS = 8, RUNNING = 6000, PENDING = 4000;
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const users = Array.from({ length: 40 }, (_, i) => `user${i}`);
const accounts = Array.from({ length: 12 }, (_, i) => `acct${i}`);
const models = ["A100-80GB", "H100-80GB", "L40S"];
const now = Date.now();

function spec(id, gpus, milli) {
  return {
    name: `train-${id}`, argv: ["python", "train.py", `--seed=${id}`], script: null, env: {}, workdir: null,
    tasks: [{ count: 1, gpus, gpu_milli: milli, cpu_milli: 4000, memory_mib: 16384, gpu_models: [] }],
    time_limit_s: 3600 * (1 + (id % 24)), user: users[id % users.length], account: accounts[id % accounts.length],
    queue: id % 5 ? "default" : "interactive", tier: id % 3, labels: {}, kind: "batch", preemptible: true,
    requeue: true, max_requeues: null, array: null, dependencies: [], signal: null, service: null,
  };
}

/** The cluster at `version` (each version moves 200 jobs). */
function generate(version) {
  const nodes = Array.from({ length: NODES }, (_, n) => ({
    name: `node-${String(n).padStart(4, "0")}`, state: n % 97 === 0 ? "drained" : "up",
    drain: n % 97 === 0 ? { reason: "maintenance", by: "ops", since_ms: now - 3600e3 } : null,
    gpu_source: "nvml", labels: {}, cpu_milli: 128000, cpu_milli_allocated: 0, memory_mib: 1 << 20, memory_mib_allocated: 0,
    gpus: Array.from({ length: GPUS }, (_, g) => ({
      index: g, model: models[n % models.length], memory_mib: 81920, healthy: (n * GPUS + g) % 499 !== 0,
      health: (n * GPUS + g) % 499 !== 0 ? null : { reason: "uncorrected ECC errors", since_ms: now - 600e3 },
      uuid: `GPU-${n}-${g}`, pci_bus_id: null, nvlink_peers: [], mig_enabled: false, mig_devices: [],
      allocated_milli: 0, jobs: [],
    })),
    notes: [],
  }));
  const running = [];
  let slot = (version * 200) % (NODES * GPUS);
  for (let i = 0; i < RUNNING; i++) {
    const id = 100000 + i + version * 200;
    const half = i % 7 === 0;
    const node = nodes[Math.floor(slot / GPUS) % NODES];
    const gpu = node.gpus[slot % GPUS];
    slot = (slot + 1) % (NODES * GPUS);
    const milli = half ? 500 : 1000;
    gpu.allocated_milli += milli;
    gpu.jobs.push([id, milli]);
    running.push({
      id, spec: spec(id, half ? 0 : 1, half ? 500 : 0), state: "running", submit_ms: now - 7200e3, start_ms: now - (i % 3600) * 1000,
      end_ms: null, tasks: [{ node: node.name, gpus: [{ index: gpu.index, milli }], cpu_milli: 4000, memory_mib: 16384, pid: 1, exit: null, started_ms: now, usage: null }],
      exit_code: null, reason: null, tier: id % 3, score: -id, stopping: null, requeues: 0, array: null, end_reason: null,
      restarts: 0, restart_at_ms: null, service_port: null, health: null, warned: false, rendezvous_port: null,
    });
  }
  const pending = Array.from({ length: PENDING }, (_, i) => {
    const id = 200000 + i + version * 200;
    return {
      id, spec: spec(id, 1 + (i % 8), 0), state: "pending", submit_ms: now - i * 1000, start_ms: null, end_ms: null, tasks: [],
      exit_code: null, tier: id % 3, score: -id, stopping: null, requeues: 0, array: null, end_reason: null, restarts: 0,
      restart_at_ms: null, service_port: null, health: null, warned: false, rendezvous_port: null,
      reason: { stage: "placement", code: "insufficient-gpus", message: `needs ${1 + (i % 8)} GPUs of model any; 0 free of 8000`, plugin: "first-fit", cycle: 42 + version },
    };
  });
  return { nodes: JSON.stringify(nodes), running: JSON.stringify(running), pending: JSON.stringify(pending) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
let data = generate(0);
const next = generate(1);
console.log(`payload: /v1/nodes ${(data.nodes.length / 1e6).toFixed(1)} MB, running jobs ${(data.running.length / 1e6).toFixed(1)} MB, pending jobs ${(data.pending.length / 1e6).toFixed(1)} MB`);

const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
const results = {};
for (const view of ["cluster", "queue"]) {
  const first = [], update = [];
  for (let r = 0; r < REPEATS; r++) {
    data = generate(0);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const json = (body) => ({ status: 200, contentType: "application/json", body });
    await page.route("**/v1/whoami", (rt) => rt.fulfill(json(JSON.stringify({ authenticated: false, user: null, token: null, accounts: [], role: "admin" }))));
    await page.route("**/v1/stream", (rt) => rt.abort());
    await page.route("**/v1/nodes", (rt) => rt.fulfill(json(data.nodes)));
    await page.route("**/v1/jobs?*", (rt) => {
      const u = new URL(rt.request().url());
      rt.fulfill(json(u.searchParams.get("state") === "pending" ? data.pending : data.running));
    });
    await page.goto(`${url}/ui/#/${view}`);
    await page.waitForFunction(() => window.gantry && window.gantry.renders.length >= 1, null, { timeout: 60000 });
    first.push(await page.evaluate(() => window.gantry.renders[0].t));
    data = next;
    const took = await page.evaluate(async () => {
      const n = window.gantry.renders.length;
      const t0 = performance.now();
      window.gantry.changed(["jobs", "nodes"]);
      while (window.gantry.renders.length === n) await new Promise((r) => setTimeout(r, 5));
      return window.gantry.renders[n].t - t0;
    });
    update.push(took);
    if (view === "cluster") {
      const tiles = await page.locator(".gpu[data-jobs]").count();
      results.domTilesInView = tiles;
    }
    await context.close();
  }
  results[view] = { first_render_ms: { median: Math.round(median(first)), worst: Math.round(Math.max(...first)) },
    live_update_ms: { median: Math.round(median(update)), worst: Math.round(Math.max(...update)) } };
  console.log(`${view}: first render median ${results[view].first_render_ms.median} ms (worst ${results[view].first_render_ms.worst}), live update median ${results[view].live_update_ms.median} ms (worst ${results[view].live_update_ms.worst}) over ${REPEATS} runs`);
}
console.log(`GPU tiles in the DOM at once (virtualised, of ${NODES * GPUS}): ${results.domTilesInView}`);
await browser.close();
console.log(JSON.stringify({ nodes: NODES, gpus: NODES * GPUS, jobs: RUNNING + PENDING, ...results }));
