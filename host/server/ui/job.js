// Job page: the record (state, reason, GPUs, times), its decisions and lifecycle events,
// its OpenTelemetry trace id, and its output streaming live.
//
// Logs: a batch job is followed with `GET /v1/jobs/{id}/attach` (JSON lines). An
// interactive job is NOT attached to — the daemon cancels an interactive job when its
// attached client goes away, and closing this page must not do that — so its log is
// polled with `GET /v1/jobs/{id}/logs` every 2 s instead.

import { api, apiText, readStream } from "./api.js";
import { h, fill, card, when, duration, gpuAsk, problem, table } from "./dom.js";

const MAX_LOG = 1 << 20; // characters kept on the page

export function jobView(id) {
  const summary = h("div", {});
  const decisions = h("div", {});
  const events = h("div", {});
  const trace = h("p", { "data-testid": "trace" });
  const log = h("pre", { class: "log", "data-testid": "log" });
  const logState = h("span", { class: "mute" });
  const taskPick = h("select", { "aria-label": "task" });
  const el = h("div", {},
    card(`Job ${id}`, summary, trace),
    h("div", { class: "card" }, h("h2", {}, "Output ", taskPick, " ", logState), log),
    h("div", { class: "grid2" }, card("Decisions", decisions), card("Events", events)));
  const stop = new AbortController();
  let following = null; // task whose log is being followed
  let job = null;

  function append(text) {
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = (log.textContent + text).slice(-MAX_LOG);
    if (atEnd) log.scrollTop = log.scrollHeight;
  }

  async function followLog(task) {
    following = task;
    log.textContent = "";
    const mine = new AbortController();
    stop.signal.addEventListener("abort", () => mine.abort());
    taskPick.onchange = () => { mine.abort(); followLog(Number(taskPick.value)); };
    if (job.spec.kind === "interactive") {
      fill(logState, "(interactive: polled, not attached)");
      while (!mine.signal.aborted) {
        try {
          log.textContent = (await apiText(`/v1/jobs/${id}/logs?task=${task}`, { signal: mine.signal })).slice(-MAX_LOG);
        } catch (e) { if (!mine.signal.aborted) fill(logState, e.message); return; }
        await new Promise((r) => setTimeout(r, 2000));
      }
      return;
    }
    fill(logState, "(live)");
    let buffer = "";
    try {
      await readStream(`/v1/jobs/${id}/attach?task=${task}`, mine.signal, (chunk) => {
        buffer += chunk;
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          let frame;
          try { frame = JSON.parse(line); } catch { continue; }
          if (frame.out !== undefined) append(frame.out);
          else if (frame.state) fill(logState, `(${frame.state}${frame.exit_code !== undefined && frame.exit_code !== null ? `, exit ${frame.exit_code}` : ""})`);
        }
      });
    } catch (e) {
      if (!mine.signal.aborted) fill(logState, e.status === 403 ? `(${e.message})` : `(stream ended: ${e.message})`);
    }
  }

  // Each task's measured GPU use (NVML's samples; `docs/user/gpu-usage.md`), or "–".
  function gpuUse(tasks) {
    const parts = tasks.flatMap((t, i) => {
      const u = t.gpu_usage;
      return u ? [`task ${i}: ${u.util_percent}% now, ${u.memory_mib} MiB (peak ${u.memory_peak_mib}), `
        + `${(u.used_gpu_milli_seconds / 3.6e6).toFixed(3)} GPU-h used`] : [];
    });
    return parts.join("; ") || "–";
  }

  return {
    el,
    parts: ["jobs"],
    close() { stop.abort(); },
    async load() {
      job = await api(`/v1/jobs/${id}`);
      const r = job.reason;
      const limit = job.spec.time_limit_s ? duration(job.spec.time_limit_s * 1000) : "no limit";
      const end = job.end_ms || Date.now();
      const gpus = job.tasks.flatMap((t) => t.gpus.map((g) => `${t.node}:${g.index}${g.milli < 1000 ? ` (${g.milli}m)` : ""}`));
      fill(summary, table(["", ""], [
        ["Name", job.spec.name],
        ["State", h("b", { "data-testid": "job-state" }, job.state), job.end_reason ? ` (${job.end_reason})` : "",
          job.exit_code !== null ? `, exit ${job.exit_code}` : ""],
        ["User / account / queue", `${job.spec.user} / ${job.spec.account} / ${job.spec.queue}`],
        ["Kind", job.spec.kind],
        ["Asks", `${gpuAsk(job.spec)}, limit ${limit}`],
        ["Reason", r ? h("span", { "data-testid": "job-reason" }, `${r.code}: ${r.message} (${r.stage}, ${r.plugin}, cycle ${r.cycle})`) : "–"],
        ["GPUs", gpus.join(", ") || "–"],
        ["GPU use", h("span", { "data-testid": "job-gpu-use" }, gpuUse(job.tasks))],
        ["Submitted", when(job.submit_ms)],
        ["Started", job.start_ms ? `${when(job.start_ms)} (${duration(end - job.start_ms)} ${job.end_ms ? "run" : "so far"})` : "–"],
        ["Priority", `tier ${job.tier}, score ${job.score}`],
      ].map(([k, ...v]) => [h("b", {}, k), h("span", {}, ...v)])));
      const [dec, ev, tr] = await Promise.allSettled([
        api(`/v1/jobs/${id}/decisions`), api(`/v1/jobs/${id}/events`), api(`/v1/jobs/${id}/trace`)]);
      fill(decisions, dec.status === "fulfilled"
        ? table(["When", "Cycle", "Decision", "Plugin", "Why"], dec.value.map((d) =>
          [when(d.at_ms), d.cycle, d.decision, d.plugin, `${d.reason_code ? d.reason_code + ": " : ""}${d.message}`]))
        : problem(dec.reason));
      fill(events, ev.status === "fulfilled"
        ? table(["When", "Event", "Detail"], ev.value.map((e) => [when(e.at_ms), e.kind, e.detail || e.message || ""]))
        : problem(ev.reason));
      fill(trace, "Trace id: ", tr.status === "fulfilled"
        ? (tr.value.trace_id ? h("code", {}, tr.value.trace_id)
          : h("span", { class: "mute" }, tr.value.exporting ? "not known to this daemon process yet" : "none (no OTLP endpoint configured)"))
        : h("span", { class: "mute" }, tr.reason.message));
      const tasks = job.spec.tasks.reduce((n, t) => n + (t.count || 1), 0);
      if (taskPick.options.length !== tasks) {
        fill(taskPick, Array.from({ length: tasks }, (_, i) => h("option", { value: i }, `task ${i}`)));
      }
      if (following === null && job.state !== "pending") followLog(0);
      else if (following === null) fill(logState, "(no output until it starts)");
    },
  };
}
