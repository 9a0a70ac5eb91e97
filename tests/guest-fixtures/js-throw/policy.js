// js-throw: a priority plugin that always fails, for tests of how the host records a
// JavaScript exception. Self-contained on purpose (no ./gantry.js import).
//
//   config {} or {"mode":"error"}  score throws new Error("js-throw: refusing to score N jobs")
//   config {"mode":"string"}       score throws the string "js-throw: refusing to score N jobs"
//
// Under componentize-qjs both come back to the host as the `err` of the result (fault
// kind `plugin-error`, the message without an "Error: " prefix); the instance is not
// trapped. (Throwing a number or a plain object would trap instead.)

let mode = "error";

export const plugin = {
  metadata() {
    return { name: "js-throw", version: "0.1.0", contract: "0.1.0", stages: ["priority"], configHint: '{"mode": "error" | "string"}' };
  },
  configure(json) {
    const c = json && json.trim() ? JSON.parse(json) : {};
    for (const k of Object.keys(c)) if (k !== "mode") throw new Error(`unknown config key "${k}" (accepted: mode)`);
    mode = c.mode === undefined ? "error" : c.mode;
    if (mode !== "error" && mode !== "string") throw new Error(`mode must be "error" or "string", got ${JSON.stringify(mode)}`);
  },
};

export const priority = {
  score(ctx, jobs, previous) {
    const n = jobs.jobs.length;
    if (mode === "string") throw "js-throw: refusing to score " + n + " jobs";
    throw new Error("js-throw: refusing to score " + n + " jobs");
  },
};
