// Policy view: the active pipeline (per stage: plugin, version, sha256, config), its
// history with who changed it and when, rollback (shown to admins only; the API refuses
// everyone else anyway), plugin faults and quarantines, and the shadow pipeline's
// differences.

import { api } from "./api.js";
import { h, fill, card, when, problem, table } from "./dom.js";

function stages(resolved) {
  return table(["Stage", "Plugin", "Version", "sha256", "Config"], resolved.map((r) => [
    r.stage, h("b", {}, r.name), r.version, h("code", { title: r.sha256 }, r.sha256.slice(0, 16) + "…"),
    h("code", {}, JSON.stringify(r.config))]), { "data-testid": "pipeline" });
}

function summary(v) {
  return v.resolved.map((r) => `${r.stage}:${r.name}`).join(" → ");
}

export function policyView(ctx) {
  const active = h("div", {});
  const history = h("div", {});
  const faults = h("div", {});
  const shadow = h("div", {});
  const message = h("p", { role: "status", "data-testid": "policy-message" });
  const rollback = h("button", {
    class: "danger", "data-testid": "rollback",
    onclick: async () => {
      if (!window.confirm("Roll back to the previous pipeline?")) return;
      rollback.disabled = true;
      try {
        const r = await api("/v1/policy/rollback", { method: "POST", body: {} });
        fill(message, `Rolled back: version ${r.version ?? r.active?.version ?? "?"} is live.`);
        await view.load();
      } catch (e) {
        fill(message, h("span", { class: "error" }, e.message));
      } finally { rollback.disabled = false; }
    },
  }, "Roll back to the previous version");
  const admin = ctx.who.role === "admin";
  const el = h("div", {},
    card("Active pipeline", active, admin ? h("div", { class: "row" }, rollback, message) : message),
    card("History", history),
    h("div", { class: "grid2" }, card("Plugin faults and quarantines", faults), card("Shadow pipeline", shadow)));
  const view = {
    el,
    parts: ["policy", "faults"],
    async load() {
      const [pol, hist, fl, sh] = await Promise.allSettled([
        api("/v1/policy"), api("/v1/policy/history"), api("/v1/faults"), api("/v1/policy/shadow/diff")]);
      if (pol.status === "fulfilled") {
        const a = pol.value.active;
        fill(active, h("p", { "data-testid": "active-version" }, h("b", {}, `Version ${a.version}`),
          ` (${a.action}${a.restores ? ` of ${a.restores}` : ""}), live since ${when(a.activated_ms)}${a.by ? ` by ${a.by}` : ""}`,
          pol.value.fallback_version ? `; failing stages fall back to version ${pol.value.fallback_version}` : "; failing stages fall back to the built-in default"),
        stages(a.resolved));
        const q = pol.value.quarantined;
        const counts = Object.entries(pol.value.fault_counts || {});
        fill(faults, h("p", { "data-testid": "quarantined" }, q.length ? `Quarantined: ${q.join(", ")}` : "No plugin is quarantined."),
          counts.length ? table(["Plugin / stage / kind", "Faults"], counts) : "",
          fl.status === "fulfilled" && fl.value.length
            ? table(["When", "Plugin", "Stage", "Fault", "Fell back"], fl.value.slice(-50).reverse().map((f) =>
              [when(f.at_ms), f.plugin?.name ?? "", f.stage, `${f.fault?.kind ?? ""}: ${f.fault?.message ?? ""}`, f.fell_back ? "yes" : "no"]))
            : h("p", { class: "mute" }, "No recent faults."));
      } else fill(active, problem(pol.reason));
      if (hist.status === "fulfilled") {
        const rows = [...hist.value].reverse();
        fill(history, table(["Version", "When", "Who", "Action", "Pipeline"], rows.map((v) => [
          v.version, when(v.activated_ms), v.by || h("span", { class: "mute" }, v.action === "default" ? "built-in" : "not recorded"),
          `${v.action}${v.restores ? ` of ${v.restores}` : ""}`, summary(v)]), { "data-testid": "history" }));
      } else fill(history, problem(hist.reason));
      if (sh.status === "fulfilled") {
        const s = sh.value;
        fill(shadow, h("p", {}, `${summary(s)} since ${when(s.since_ms)}: ${s.cycles} cycles, ${s.cycles_differing} differing, ${s.differences} different decisions, ${s.faults} faults.`),
          s.recent.length ? table(["Difference"], s.recent.slice(-20).reverse().map((d) => [h("code", {}, JSON.stringify(d))])) : "");
      } else fill(shadow, h("p", { class: "mute" }, sh.reason.status === 404 ? "No shadow pipeline is set." : sh.reason.message));
    },
  };
  return view;
}
