// Benchmark guest: the same logic as the Rust `fifo` plugin (earlier submit scores
// higher), in JavaScript, for the per-language call-cost benchmark.
export const plugin = {
  metadata() {
    return { name: "js-fifo", version: "0.1.0", contract: "0.1.0", stages: ["priority"], configHint: "" };
  },
  configure(_config) {},
};
export const priority = {
  score(_ctx, jobs, _previous) {
    return jobs.jobs.map((j) => ({ score: -Number(j.submitMs), tier: undefined, note: undefined }));
  },
};
