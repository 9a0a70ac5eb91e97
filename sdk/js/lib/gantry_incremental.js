// Contract 0.2 (`gantry:policy@0.2.0`) for JavaScript plugins: the SDK keeps the view.
//
// In 0.2 the host sends each call only what changed since the plugin's previous call
// (`wit/0.2.0/README.md`): a sync point and, for every list, a delta (`keep`: for each
// element, the index of an unchanged element of the previous call's list, or 0xffffffff
// for the next element of `fresh`). This module keeps the lists and the string table
// between calls and hands your function the whole `job-list`, `node-list` and
// `running-list` of 0.1, so a stage is written exactly as for 0.1:
//
//   import { metadata } from "./gantry.js";
//   import * as incremental from "./gantry_incremental.js";
//   export const priority = {
//     score: incremental.score((ctx, jobs, previous) => jobs.jobs.map(...)),
//   };
//
// and build against wit/0.2.0 with `metadata(..., contract: "0.2.0")`. `score` answers
// 0.2's `scores` (numbers, and tier overrides and notes by job index): return the 0.1
// array of `{ score, tier, note }` and the wrapper makes it one. `place` answers
// 0.2's flat `placed` (wit/0.2.0/stages.wit): return one (`placed(starts, pending,
// stoppedAt)` builds it), or a plan written as for 0.1 (`{ starts: [{ job, tasks: [{ node,
// gpus: [{ index, milli }], cpuMilli, memoryMib }] }], pending, stoppedAt }`), which the
// wrapper flattens. Kept records
// move (their `first*` offsets are rewritten); nothing is copied. A delta that does not
// fit, or a call out of sequence, throws and forgets everything: the host then resends
// in full. So does any exception your function throws.

/** `keep` entry meaning "the next element of `fresh`". */
export const FRESH = 0xffffffff;

let view = { generation: 0n, strings: [], lists: new Map(), flat: new Map() };

/** Forgets every list and the string table (the host resends in full next). */
export function reset() {
  view = { generation: 0n, strings: [], lists: new Map(), flat: new Map() };
}

// Whether a delta keeps `slot`'s list exactly as it was (a quiet cluster): then the
// previous call's flat lists are handed over again (copied: a function may sort them).
function unchanged(slot, keep, freshCount) {
  const old = view.lists.get(slot);
  if (freshCount !== 0 || !view.flat.has(slot) || !old || keep.length !== old.length) return false;
  for (let i = 0; i < keep.length; i++) if (keep[i] >>> 0 !== i) return false;
  return true;
}

const remember = (slot, parts) => view.flat.set(slot, parts.map((p) => [...p]));
const again = (slot) => view.flat.get(slot).map((p) => [...p]);

function begin(ctx, sync) {
  if (BigInt(sync.base) === 0n) {
    reset();
  } else if (BigInt(sync.base) !== view.generation) {
    const have = view.generation;
    reset();
    throw new Error(`the plugin's view is at call ${have}, the host sent a delta from call ${sync.base}: resend in full`);
  }
  for (const s of ctx.strings) view.strings.push(s);
  ctx.strings = view.strings;
}

function apply(slot, keep, fresh) {
  const old = view.lists.get(slot) || [];
  const taken = new Uint8Array(old.length);
  const out = [];
  let next = 0;
  for (const raw of keep) {
    const k = raw >>> 0; // a u32 may arrive as a signed 32-bit number
    if (k === FRESH) {
      if (next >= fresh.length) throw new Error("a delta names more fresh elements than it carries");
      out.push(fresh[next++]);
    } else if (k < old.length && !taken[k]) {
      taken[k] = 1;
      out.push(old[k]);
    } else {
      throw new Error(`a delta keeps element ${k} of a previous list of ${old.length} (out of range or twice)`);
    }
  }
  if (next !== fresh.length) throw new Error("a delta carries fresh elements it does not place");
  view.lists.set(slot, out);
  return out;
}

const span = (items, first, count) => items.slice(first, first + count);

function jobItems(fl) {
  return fl.jobs.map((j) => [j, span(fl.groups, j.firstGroup, j.groupCount), span(fl.labels, j.firstLabel, j.labelCount)]);
}

function jobList(items) {
  const jobs = [];
  const groups = [];
  const labels = [];
  for (const [job, g, l] of items) {
    job.firstGroup = groups.length;
    job.groupCount = g.length;
    job.firstLabel = labels.length;
    job.labelCount = l.length;
    groups.push(...g);
    labels.push(...l);
    jobs.push(job);
  }
  return { jobs, groups, labels };
}

function jobs(slot, delta) {
  if (unchanged(slot, delta.keep, delta.fresh.jobs.length)) {
    const [js, groups, labels] = again(slot);
    return { jobs: js, groups, labels };
  }
  const out = jobList(apply(slot, delta.keep, jobItems(delta.fresh)));
  remember(slot, [out.jobs, out.groups, out.labels]);
  return out;
}

function nodes(slot, delta) {
  const fl = delta.fresh;
  if (unchanged(slot, delta.keep, fl.nodes.length)) {
    const [ns, gpus, labels] = again(slot);
    return { nodes: ns, gpus, labels };
  }
  const fresh = fl.nodes.map((n) => [n, span(fl.gpus, n.firstGpu, n.gpuCount), span(fl.labels, n.firstLabel, n.labelCount)]);
  const out = { nodes: [], gpus: [], labels: [] };
  for (const [node, g, l] of apply(slot, delta.keep, fresh)) {
    node.firstGpu = out.gpus.length;
    node.gpuCount = g.length;
    node.firstLabel = out.labels.length;
    node.labelCount = l.length;
    out.gpus.push(...g);
    out.labels.push(...l);
    out.nodes.push(node);
  }
  remember(slot, [out.nodes, out.gpus, out.labels]);
  return out;
}

function running(slot, delta) {
  const fl = delta.fresh;
  if (unchanged(slot, delta.keep, fl.running.length)) {
    const [js, groups, labels, run, tasks, shares] = again(slot);
    return { jobs: { jobs: js, groups, labels }, running: run, tasks, shares };
  }
  const js = jobItems(fl.jobs);
  const fresh = fl.running.map((r, i) => [
    js[i],
    r,
    span(fl.tasks, r.firstTask, r.taskCount).map((t) => [t, span(fl.shares, t.firstShare, t.shareCount)]),
  ]);
  const items = apply(slot, delta.keep, fresh);
  const out = { jobs: jobList(items.map(([j]) => j)), running: [], tasks: [], shares: [] };
  for (const [, r, ts] of items) {
    r.firstTask = out.tasks.length;
    r.taskCount = ts.length;
    for (const [t, sh] of ts) {
      t.firstShare = out.shares.length;
      t.shareCount = sh.length;
      out.shares.push(...sh);
      out.tasks.push(t);
    }
    out.running.push(r);
  }
  const j = out.jobs;
  remember(slot, [j.jobs, j.groups, j.labels, out.running, out.tasks, out.shares]);
  return out;
}

function guarded(sync, call) {
  let result;
  try {
    result = call();
  } catch (e) {
    reset();
    throw e;
  }
  view.generation = BigInt(sync.generation);
  return result;
}

/** `checkSubmit(ctx, job)` of 0.1 as 0.2's `check-submit` (the job comes whole). */
export function checkSubmit(fn) {
  return function (ctx, sync, job) {
    begin(ctx, sync);
    return guarded(sync, () => fn.call(this, ctx, job));
  };
}

/** `admit(ctx, jobs)` of 0.1 as 0.2's `admit`. */
export function admit(fn) {
  return function (ctx, sync, delta) {
    begin(ctx, sync);
    return guarded(sync, () => fn.call(this, ctx, jobs("admit", delta)));
  };
}

/** `score(ctx, jobs, previous)` of 0.1 as 0.2's `score`. */
export function score(fn) {
  return function (ctx, sync, delta, previous) {
    begin(ctx, sync);
    return guarded(sync, () => asScores(fn.call(this, ctx, jobs("score", delta), previous)));
  };
}

/**
 * 0.2's `scores` from a 0.1 array of scored results (`{ score, tier, note }`, as
 * `scored()` of gantry.js makes them): the numbers, and the tier overrides and notes by
 * job index.
 */
export function scores(scored) {
  const out = { scores: [], tiers: [], notes: [] };
  scored.forEach((s, job) => {
    out.scores.push(Number(s.score));
    if (s.tier !== undefined && s.tier !== null) out.tiers.push({ job, tier: s.tier });
    if (s.note !== undefined && s.note !== null) out.notes.push({ job, note: s.note });
  });
  return out;
}

// A function's answer as `scores`: an array is made one; anything else goes as it is (the
// host's lowering names what is wrong with it).
const asScores = (answer) => (Array.isArray(answer) ? scores(answer) : answer);

/** `place(ctx, jobs, nodes, running)` of 0.1 as 0.2's `place`. */
export function place(fn) {
  return function (ctx, sync, j, n, r) {
    begin(ctx, sync);
    return guarded(sync, () =>
      asPlaced(fn.call(this, ctx, jobs("place.jobs", j), nodes("place.nodes", n), running("place.running", r))),
    );
  };
}

/**
 * 0.2's `placed` from starts written as for 0.1 (`{ job, tasks: [{ node, gpus: [{ index,
 * milli }], cpuMilli, memoryMib }] }`): each start's tasks and their GPU shares go into one
 * flat list each, each start and task naming its range.
 */
export function placed(starts = [], pending = [], stoppedAt = undefined) {
  const out = { starts: [], tasks: [], shares: [], pending: [...pending], stoppedAt };
  for (const s of starts) {
    out.starts.push({ job: s.job, firstTask: out.tasks.length, taskCount: s.tasks.length });
    for (const t of s.tasks) {
      out.tasks.push({
        node: t.node,
        firstShare: out.shares.length,
        shareCount: t.gpus.length,
        cpuMilli: t.cpuMilli,
        memoryMib: t.memoryMib,
      });
      for (const g of t.gpus) out.shares.push({ index: g.index, milli: g.milli });
    }
  }
  return out;
}

// A function's answer as `placed`: as it is when it already is one (or is no plan at all:
// the host's lowering names what is wrong with it).
function asPlaced(plan) {
  if (plan == null || typeof plan !== "object" || "shares" in plan || !("starts" in plan)) return plan;
  return placed(plan.starts, plan.pending ?? [], plan.stoppedAt);
}

/** `preempt(ctx, blocked, blockedScores, nodes, running)` of 0.1 as 0.2's `preempt`. */
export function preempt(fn) {
  return function (ctx, sync, b, scores, n, r) {
    begin(ctx, sync);
    return guarded(sync, () =>
      fn.call(
        this,
        ctx,
        jobs("preempt.blocked", b),
        scores,
        nodes("preempt.nodes", n),
        running("preempt.running", r),
      ),
    );
  };
}
