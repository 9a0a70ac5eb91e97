// gantry.js: helpers for Gantry policy plugins written in JavaScript.
//
// Built with componentize-qjs (QuickJS). The build copies this file next to your
// policy.js, so a plugin imports it as `import { ... } from "./gantry.js"`.
// No dependencies; nothing here touches a clock, randomness or I/O.
//
// How the contract (wit/) looks from JavaScript under componentize-qjs 0.4.5:
//   * records are plain objects with camelCase fields (`submitMs`, `firstGroup`);
//   * enums are strings ("priority", "batch", "insufficient-gpus");
//   * u64 values (ids, `*Ms`, `seed`, `memoryMib`) arrive as plain `number`s, exact
//     up to 2^53 (Number.MAX_SAFE_INTEGER); wrap them in Number(...) anyway and your
//     code also works should a later toolchain hand out BigInt;
//   * an option<T> argument arrives as `T` or `null`; an option<T> you return may be
//     `undefined`, `null` or left out;
//   * a `result` error is signalled by throwing an Error (its message becomes the
//     error) or a string; throwing anything else (a number, a plain object) traps.

import { log as hostLog } from "gantry:policy/host@0.1.0";

/** The contract version these helpers and the WIT in wit/ describe. */
export const CONTRACT = "0.1.0";

/** The stage names `metadata.stages` may list. */
export const STAGES = Object.freeze(["admission", "priority", "placement", "preemption"]);

/** The `reason-code` enum of the contract, as the strings JavaScript sees. */
export const REASON_CODES = Object.freeze([
  "held-by-policy",
  "insufficient-gpus",
  "insufficient-cpu",
  "insufficient-memory",
  "gpu-model-unavailable",
  "blocked-by-higher-priority",
  "waiting-for-preemption",
  "preempted",
  "other",
]);

const LEVELS = ["trace", "debug", "info", "warn", "error"];

// ---------------------------------------------------------------------------
// Metadata and configuration
// ---------------------------------------------------------------------------

/**
 * The value `plugin.metadata()` returns.
 *
 * @param {string} name short plugin name, e.g. "js-deadline" (pipelines refer to it)
 * @param {string} version the plugin's own semver version
 * @param {string[]} stages the stages it implements, e.g. ["priority"]; each must be
 *   exported by the component (build against the matching world)
 * @param {string} [hint] free text describing the JSON `configure` accepts
 * @param {string} [contract] the contract it is built against: `CONTRACT` (0.1.0), or
 *   "0.2.0" for a plugin built against wit/0.2.0 with `gantry_incremental.js`
 * @returns {{name: string, version: string, contract: string, stages: string[], configHint: string}}
 * @throws {Error} on an empty or unknown stage list (at load, with a clear message)
 */
export function metadata(name, version, stages, hint = "", contract = CONTRACT) {
  if (!Array.isArray(stages) || stages.length === 0) {
    throw new Error(`metadata(${JSON.stringify(name)}): stages must be a non-empty array`);
  }
  for (const s of stages) {
    if (!STAGES.includes(s)) {
      throw new Error(`metadata(${JSON.stringify(name)}): unknown stage ${JSON.stringify(s)} (one of ${STAGES.join(", ")})`);
    }
  }
  return { name: String(name), version: String(version), contract: String(contract), stages: [...stages], configHint: String(hint) };
}

function describe(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return `a ${typeof v} (${JSON.stringify(v)})`;
}

/**
 * Parses the pipeline's JSON config for this plugin against `defaults`.
 *
 * Every key of the config must be a key of `defaults`, and its value must have the
 * same JSON type as the default (number, string, boolean, array or object; a default
 * of `null` accepts anything). Missing keys take their default. "" and "{}" give the
 * defaults. Throw what it throws from `configure` (or let it propagate): the host
 * refuses the pipeline with that message.
 *
 * @template {Record<string, any>} T
 * @param {string} json the string `configure` received
 * @param {T} defaults every accepted key with its default value
 * @returns {T} a new object: defaults overlaid with the config
 * @throws {Error} `unknown config key "x" (accepted: a, b)`, a type mismatch, or invalid JSON
 * @example
 *   configure(json) { cfg = parseConfig(json, { horizon_h: 24, boost: 1000 }); }
 */
export function parseConfig(json, defaults = {}) {
  let value = {};
  if (json !== undefined && json !== null && String(json).trim() !== "") {
    try {
      value = JSON.parse(json);
    } catch (e) {
      throw new Error(`config is not valid JSON: ${e.message}`);
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`config must be a JSON object, got ${describe(value)}`);
  }
  const out = { ...defaults };
  const known = Object.keys(defaults);
  for (const [key, v] of Object.entries(value)) {
    if (!Object.prototype.hasOwnProperty.call(defaults, key)) {
      throw new Error(`unknown config key ${JSON.stringify(key)} (accepted: ${known.length ? known.join(", ") : "none"})`);
    }
    const d = defaults[key];
    if (d !== null && d !== undefined) {
      const same = Array.isArray(d) ? Array.isArray(v) : typeof v === typeof d && v !== null && !Array.isArray(v);
      if (!same) {
        throw new Error(`config key ${JSON.stringify(key)} must be ${Array.isArray(d) ? "an array" : `a ${typeof d}`}, got ${describe(v)}`);
      }
    }
    out[key] = v;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Symbols and ranges
// ---------------------------------------------------------------------------

/**
 * The text of a symbol: `ctx.strings[sym]`.
 *
 * @param {{strings: string[]}} ctx the call's cycle
 * @param {number} sym a symbol (job.name, job.user, label.key, gpu.model ...)
 * @returns {string}
 */
export function text(ctx, sym) {
  const s = ctx.strings[sym];
  if (s === undefined) throw new Error(`symbol ${sym} is not in this call's string table (${ctx.strings.length} strings)`);
  return s;
}

/**
 * The symbol of `s` in this call, or `undefined` when no string of the call is `s`
 * (then no job, node or label of the call carries it). The host interns each distinct
 * string once per call, so comparing symbols is comparing strings. Linear in the
 * table: look a name up once per call, not once per job.
 *
 * @param {{strings: string[]}} ctx
 * @param {string} s
 * @returns {number | undefined}
 */
export function symbol(ctx, s) {
  const i = ctx.strings.indexOf(s);
  return i < 0 ? undefined : i;
}

/**
 * A job's task groups: `list.groups[job.firstGroup .. job.firstGroup + job.groupCount]`.
 *
 * @param {{groups: object[]}} list the job-list that carries `job`
 * @param {{firstGroup: number, groupCount: number}} job
 * @returns {Array<{count: number, gpus: number, gpuMilli: number, cpuMilli: number, memoryMib: number, gpuModelMask: number}>}
 */
export function tasks(list, job) {
  return list.groups.slice(job.firstGroup, job.firstGroup + job.groupCount);
}

/**
 * A job's (or a node's) labels as an object key -> value (texts, not symbols).
 * The object has no prototype, so a label named "constructor" is just a label.
 * Allocates one object per call: for one key, prefer {@link label}.
 *
 * @param {{strings: string[]}} ctx
 * @param {{labels: Array<{key: number, value: number}>}} list the job-list (or node-list)
 * @param {{firstLabel: number, labelCount: number}} job
 * @returns {Record<string, string>}
 */
export function labels(ctx, list, job) {
  const out = Object.create(null);
  const end = job.firstLabel + job.labelCount;
  for (let i = job.firstLabel; i < end; i++) {
    const l = list.labels[i];
    out[ctx.strings[l.key]] = ctx.strings[l.value];
  }
  return out;
}

/**
 * The value of one label of a job (or node), or `undefined` when it has none.
 *
 * @param {{strings: string[]}} ctx
 * @param {{labels: Array<{key: number, value: number}>}} list
 * @param {{firstLabel: number, labelCount: number}} job
 * @param {string | number} key the label key as text, or as a symbol from {@link symbol}
 * @returns {string | undefined}
 */
export function label(ctx, list, job, key) {
  const end = job.firstLabel + job.labelCount;
  for (let i = job.firstLabel; i < end; i++) {
    const l = list.labels[i];
    if (typeof key === "number" ? l.key === key : ctx.strings[l.key] === key) return ctx.strings[l.value];
  }
  return undefined;
}

/**
 * The number of tasks of a job (its groups' counts summed).
 *
 * @param {{groups: Array<{count: number}>}} list
 * @param {{firstGroup: number, groupCount: number}} job
 * @returns {number}
 */
export function taskCount(list, job) {
  let n = 0;
  for (let i = job.firstGroup; i < job.firstGroup + job.groupCount; i++) n += list.groups[i].count;
  return n;
}

/**
 * Everything a job asks for in milli-GPU (4 whole GPUs = 4000; 2 tasks of 250
 * milli-GPU = 500), over all its tasks.
 *
 * @param {{groups: Array<{count: number, gpus: number, gpuMilli: number}>}} list
 * @param {{firstGroup: number, groupCount: number}} job
 * @returns {number}
 */
export function gpuMilli(list, job) {
  let m = 0;
  for (let i = job.firstGroup; i < job.firstGroup + job.groupCount; i++) {
    const g = list.groups[i];
    m += g.count * (g.gpus * 1000 + g.gpuMilli);
  }
  return m;
}

// ---------------------------------------------------------------------------
// Results: scores, verdicts, reasons
// ---------------------------------------------------------------------------

/**
 * A priority stage's entry for one job.
 *
 * @param {number} score higher runs first within a tier (a finite number, not a BigInt)
 * @param {{tier?: number, note?: string}} [opts] `tier` overrides the job's tier;
 *   `note` is shown with the job while it waits (`reason.priority_note`)
 * @returns {{score: number, tier: number | undefined, note: string | undefined}}
 */
export function scored(score, opts = {}) {
  return { score: Number(score), tier: opts.tier, note: opts.note };
}

/**
 * A `reason` record.
 *
 * @param {string} code one of {@link REASON_CODES}
 * @param {string} message for people, e.g. "needs 4 GPUs; 2 free of 4"
 * @returns {{code: string, message: string}}
 */
export function reason(code, message) {
  if (!REASON_CODES.includes(code)) {
    throw new Error(`unknown reason code ${JSON.stringify(code)} (one of ${REASON_CODES.join(", ")})`);
  }
  return { code, message: String(message) };
}

/** Admission `verdict`: admit the job this cycle. */
export function admit() {
  return { tag: "admit" };
}

/**
 * Admission `verdict`: hold the job this cycle.
 *
 * @param {string} message why, for the user
 * @param {string} [code] a reason code, "held-by-policy" by default
 */
export function hold(message, code = "held-by-policy") {
  return { tag: "hold", val: reason(code, message) };
}

/** Admission `submit-verdict`: accept the job as submitted. */
export function accept() {
  return { tag: "accept" };
}

/**
 * Admission `submit-verdict`: accept after applying defaults.
 *
 * @param {{queue?: string, tier?: number, timeLimitS?: number, preemptible?: boolean, labels?: Array<[string, string]>}} patch
 *   fields left out stay as submitted; `labels` are added or overwritten
 */
export function acceptWith(patch) {
  return {
    tag: "accept-with",
    val: {
      queue: patch.queue,
      tier: patch.tier,
      timeLimitS: patch.timeLimitS,
      preemptible: patch.preemptible,
      labels: patch.labels ?? [],
    },
  };
}

/**
 * Admission `submit-verdict`: refuse the job; the client gets HTTP 422 with `message`.
 *
 * @param {string} message
 */
export function reject(message) {
  return { tag: "reject", val: String(message) };
}

// ---------------------------------------------------------------------------
// Time, randomness, logging
// ---------------------------------------------------------------------------

const ISO = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))$/;

function daysIn(year, month) {
  return [31, (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
}

/**
 * Parses a time written as ISO-8601 with a zone (`2026-12-01T18:00:00Z`,
 * `2026-12-01T18:00Z`, `2026-12-01T20:00:00.5+02:00`) or as epoch milliseconds
 * (`1796148000000`). Parsed by hand: no clock is read, the result does not depend
 * on the engine's Date parser, and a time without a zone is refused rather than
 * guessed.
 *
 * @param {string} s
 * @returns {number | undefined} ms since the Unix epoch, or undefined if `s` is not such a time
 */
export function parseTime(s) {
  if (typeof s !== "string") return undefined;
  const t = s.trim();
  if (/^\d{1,16}$/.test(t)) return Number(t);
  const m = ISO.exec(t);
  if (!m) return undefined;
  const [year, month, day, hour, minute] = [1, 2, 3, 4, 5].map((i) => Number(m[i]));
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const ms = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMin = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMin = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMin * 60000;
}

/**
 * Formats ms since the epoch as ISO-8601 UTC without milliseconds when they are 0:
 * `2026-12-01T18:00:00Z`.
 *
 * @param {number} ms
 * @returns {string}
 */
export function formatTime(ms) {
  const iso = new Date(Number(ms)).toISOString();
  return iso.endsWith(".000Z") ? `${iso.slice(0, -5)}Z` : iso;
}

/**
 * A deterministic pseudo-random generator (splitmix32-style) seeded from the cycle:
 * `const r = rng(ctx.seed); r()` gives numbers in [0, 1). The same seed gives the same
 * sequence, which is what the host asks for. `Math.random()` does not trap, but it
 * restarts from the same build-time state in every fresh instance; do not use it.
 *
 * @param {number | bigint} seed usually `ctx.seed`
 * @returns {() => number}
 */
export function rng(seed) {
  const n = BigInt.asUintN(64, BigInt(typeof seed === "number" ? Math.trunc(seed) : seed));
  let state = Number(n & 0xffffffffn) ^ Number((n >> 32n) & 0xffffffffn) ^ 0x9e3779b9;
  return function next() {
    state = (state + 0x9e3779b9) | 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z ^= z >>> 16;
    return (z >>> 0) / 4294967296;
  };
}

/**
 * Writes a line into the plugin's log (the daemon's log, tagged with the plugin name;
 * rate-limited per call). There is no `console` under QuickJS: use this.
 *
 * @param {"trace" | "debug" | "info" | "warn" | "error"} level
 * @param {string} message
 */
export function log(level, message) {
  if (!LEVELS.includes(level)) throw new Error(`unknown log level ${JSON.stringify(level)} (one of ${LEVELS.join(", ")})`);
  hostLog(level, String(message));
}
