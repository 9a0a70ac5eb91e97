// The dashboard's entry: sign-in, the hash router (#/cluster, #/queue, #/job/ID,
// #/services, #/policy, #/usage) and live updates. A `changed` event from `/v1/stream`
// reloads the current view when it shows one of the parts that changed; a view that
// sets `every` (ms) is also reloaded that often while shown and the tab is visible (for
// what the stream does not fingerprint: elapsed times, health, autoscaler readings).
// Reloads never overlap (one that arrives during a load runs once after it).
//
// For tests and the benchmark, `window.gantry` exposes the render log (`renders`: view,
// kind first/update, ms from the start of the load to the next frame after the DOM
// update, t: the page's clock then) and `changed(parts)`, the same entry the stream
// calls. `#view[data-loads]` counts loads.

import { api, token, setToken, clearToken, follow, ApiError } from "./api.js";
import { fill, problem } from "./dom.js";
import { clusterView } from "./cluster.js";
import { queueView } from "./queue.js";
import { jobView } from "./job.js";
import { policyView } from "./policy.js";
import { usageView } from "./usage.js";
import { servicesView } from "./services.js";

const $ = (id) => document.getElementById(id);
const state = { who: null, view: null, loading: false, again: false, stopStream: null, loads: 0, timer: null };
const gantry = { renders: [], changed: (parts) => changed(parts) };
window.gantry = gantry;

function route() {
  const [, name = "cluster", arg] = (location.hash || "#/cluster").split("/");
  return { name, arg };
}

function makeView({ name, arg }) {
  const ctx = { who: state.who };
  switch (name) {
    case "queue": return queueView(ctx);
    case "job": return jobView(Number(arg));
    case "policy": return policyView(ctx);
    case "usage": return usageView(ctx);
    case "services": return servicesView(ctx);
    default: return clusterView(ctx);
  }
}

async function load(kind) {
  const view = state.view;
  if (!view) return;
  if (state.loading) { state.again = true; return; }
  state.loading = true;
  const t0 = performance.now();
  try {
    await view.load();
    if (view === state.view) {
      await new Promise((r) => requestAnimationFrame(() => r()));
      gantry.renders.push({ view: route().name, kind, ms: performance.now() - t0, t: performance.now() });
      if (gantry.renders.length > 200) gantry.renders.shift();
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) { signOut("Your token is no longer valid."); return; }
    if (view === state.view) $("view").prepend(problem(e));
  } finally {
    state.loading = false;
    state.loads += 1;
    $("view").dataset.loads = String(state.loads);
  }
  if (state.again) { state.again = false; load("update"); }
}

function show() {
  if (state.view && state.view.close) state.view.close();
  clearInterval(state.timer);
  const r = route();
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === r.name || (r.name === "job" && a.dataset.view === "queue"));
  }
  const view = makeView(r);
  state.view = view;
  fill($("view"), view.el);
  if (view.every) state.timer = setInterval(() => { if (state.view === view && !document.hidden) load("tick"); }, view.every);
  load("first");
}

function changed(parts) {
  if (state.view && parts.some((p) => state.view.parts.includes(p))) load("update");
}

function live(on) {
  $("live").textContent = on ? "live" : "reconnecting…";
  $("live").classList.toggle("on", on);
}

function signOut(message) {
  clearToken();
  if (state.stopStream) state.stopStream();
  state.who = null;
  state.view = null;
  clearInterval(state.timer);
  fill($("view"));
  fill($("who"));
  $("logout").hidden = true;
  $("login").hidden = false;
  fill($("login-error"), message || "");
}

async function start() {
  try {
    state.who = await api("/v1/whoami");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      signOut(token() ? "That token is not valid." : "");
      return;
    }
    fill($("view"), problem(e));
    return;
  }
  $("login").hidden = true;
  const w = state.who;
  fill($("who"), w.authenticated ? `${w.user} (${w.role})` : "open daemon (no tokens)");
  $("who").dataset.role = w.role;
  $("logout").hidden = !w.authenticated;
  state.stopStream = follow(changed, live);
  show();
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  setToken($("token").value.trim(), $("remember").checked);
  $("token").value = "";
  start();
});
$("logout").addEventListener("click", () => signOut());
window.addEventListener("hashchange", () => { if (state.who) show(); });
start();
