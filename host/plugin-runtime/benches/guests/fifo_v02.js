// Benchmark guest: `fifo` in JavaScript on contract 0.2 (gantry_incremental.js keeps the
// view; the function is the 0.1 one), for the per-language call-cost benchmark.
import * as incremental from "./gantry_incremental.js";

export const plugin = {
  metadata() {
    return { name: "js-fifo", version: "0.1.0", contract: "0.2.0", stages: ["priority"], configHint: "" };
  },
  configure(_config) {},
};
export const priority = {
  score: incremental.score((_ctx, jobs, _previous) =>
    jobs.jobs.map((j) => ({ score: -Number(j.submitMs), tier: undefined, note: undefined })),
  ),
};
