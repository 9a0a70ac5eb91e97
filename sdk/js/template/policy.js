// A minimal Gantry priority plugin in JavaScript: jobs labelled `priority=high`
// (configurable) run first, then everything in submit order (fifo).
//
// Build (from the repository root; see sdk/js/README.md):
//   scripts/build-plugin-examples        -> target/plugin-examples/js-template.wasm
// Use:
//   gantry plugin add target/plugin-examples/js-template.wasm
//   gantry policy set pipeline.json      # {"priority":[{"plugin":"js-template"}],"placement":{"plugin":"first-fit"}}

import { metadata, parseConfig, label, scored } from "./gantry.js";

const DEFAULTS = { key: "priority", value: "high" };
let cfg = DEFAULTS;

export const plugin = {
  metadata: () => metadata("js-template", "0.1.0", ["priority"], '{"key": "priority", "value": "high"}: jobs with this label run first, then fifo'),
  configure(json) {
    cfg = parseConfig(json, DEFAULTS); // throws (rejecting the pipeline) on an unknown key
  },
};

export const priority = {
  // One entry per job, in order. Higher runs first; submitMs is ms since the epoch.
  score(ctx, jobs, previous) {
    return jobs.jobs.map((job) => {
      const high = label(ctx, jobs, job, cfg.key) === cfg.value;
      const fifo = -Number(job.submitMs); // earlier submit = higher score
      return high ? scored(1e13 + fifo, { note: `${cfg.key}=${cfg.value}: runs first` }) : scored(fifo);
    });
  },
};
