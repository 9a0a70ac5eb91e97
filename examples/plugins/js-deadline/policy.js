// js-deadline: deadline-aware priority (an organisation's own policy, in JavaScript).
//
// Jobs may carry a label `deadline` = an ISO-8601 time with a zone
// (`2026-12-01T18:00:00Z`) or epoch milliseconds (`1796148000000`). Three bands:
//
//   top     a deadline within the horizon, still ahead: score = boost * (1 - remaining/horizon),
//           in [0, boost], so the closest deadline is highest and every such job is
//           above every job of the middle band;
//   middle  no deadline, a deadline beyond the horizon, or an invalid label:
//           fifo, score = -submitMs / 1e6 (about -1.8e6 today, always < 0);
//   bottom  a deadline that has passed: tier -1 (or the job's own tier if lower),
//           fifo among themselves, with a note saying so.
//
// Config (all optional, unknown keys are rejected): {"horizon_h": 24, "boost": 1000}.
// Time is ctx.nowMs, the cycle's time; the plugin reads no clock.

import { metadata, parseConfig, symbol, label, parseTime, formatTime, scored } from "./gantry.js";

const DEFAULTS = { horizon_h: 24, boost: 1000 };
const HINT = '{"horizon_h": 24, "boost": 1000}: label `deadline` (ISO-8601 with zone, or epoch ms); ' +
  "within horizon_h hours of it a job rises above fifo (up to boost), past it the job drops to tier -1";
// Epoch-ms values below this (1973-03-03) are almost surely epoch seconds: call them invalid.
const MIN_EPOCH_MS = 1e11;

let horizonMs = DEFAULTS.horizon_h * 3600e3;
let boost = DEFAULTS.boost;

export const plugin = {
  metadata: () => metadata("js-deadline", "0.1.0", ["priority"], HINT),
  configure(json) {
    const c = parseConfig(json, DEFAULTS);
    if (!(c.horizon_h > 0) || !Number.isFinite(c.horizon_h)) throw new Error(`horizon_h must be a positive number of hours, got ${c.horizon_h}`);
    if (!(c.boost > 0) || !Number.isFinite(c.boost)) throw new Error(`boost must be a positive number, got ${c.boost}`);
    horizonMs = c.horizon_h * 3600e3;
    boost = c.boost;
  },
};

/** Deadline of a label value: ms since the epoch, or undefined when invalid. */
function deadlineOf(value) {
  const ms = parseTime(value);
  if (ms === undefined || ms < MIN_EPOCH_MS) return undefined;
  return ms;
}

function inMinutes(ms) {
  const min = Math.round(ms / 60000);
  return min < 120 ? `${min} min` : `${(ms / 3600e3).toFixed(1)} h`;
}

export const priority = {
  score(ctx, jobs, previous) {
    const now = Number(ctx.nowMs);
    // Look the key up once per call; when no string of the call is "deadline", no job has one.
    const key = symbol(ctx, "deadline");
    const parsed = new Map(); // label value symbol -> deadline ms | undefined (values repeat across jobs)
    return jobs.jobs.map((job) => {
      const fifo = -Number(job.submitMs) / 1e6;
      if (key === undefined) return scored(fifo);
      const value = label(ctx, jobs, job, key);
      if (value === undefined) return scored(fifo);
      let deadline = parsed.get(value);
      if (!parsed.has(value)) {
        deadline = deadlineOf(value);
        parsed.set(value, deadline);
      }
      if (deadline === undefined) {
        return scored(fifo, {
          note: `deadline label ${JSON.stringify(value)} is invalid (want ISO-8601 with a zone like 2026-12-01T18:00:00Z, or epoch ms): ordered as if it had none`,
        });
      }
      const remaining = deadline - now;
      if (remaining < 0) {
        return scored(fifo, {
          tier: Math.min(-1, job.tier),
          note: `past its deadline (${formatTime(deadline)}): moved to the bottom`,
        });
      }
      if (remaining <= horizonMs) {
        return scored(boost * (1 - remaining / horizonMs), {
          note: `deadline ${formatTime(deadline)} in ${inMinutes(remaining)}: moved up`,
        });
      }
      return scored(fifo);
    });
  },
};
