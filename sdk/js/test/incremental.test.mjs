// Native unit tests of sdk/js/lib/gantry_incremental.js (contract 0.2's view): random
// sequences of job lists, encoded as the host does, reach the wrapped function whole and
// in order; nodes and running lists too; a delta that does not fit, or a call out of
// sequence, throws and forgets everything.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as inc from "../lib/gantry_incremental.js";

const FRESH = inc.FRESH;

function jobList(pairs) {
  const out = { jobs: [], groups: [], labels: [] };
  for (const [id, gpus] of pairs) {
    out.jobs.push({ id, gpus, firstGroup: out.groups.length, groupCount: 1, firstLabel: out.labels.length, labelCount: 1 });
    out.groups.push(`group ${id} ${gpus}`);
    out.labels.push(`label ${id}`);
  }
  return out;
}

function encode(previous, now) {
  const at = new Map(previous.map((x, k) => [x.join(","), k]));
  const keep = [];
  const fresh = [];
  for (const x of now) {
    const k = at.get(x.join(","));
    if (k !== undefined) {
      keep.push(k);
      at.delete(x.join(","));
    } else {
      keep.push(FRESH);
      fresh.push(x);
    }
  }
  return [keep, fresh];
}

let seen;
const score = inc.score((ctx, jobs, _previous) => {
  seen = { jobs: jobs.jobs.map((j) => [j.id, j.gpus, jobs.groups[j.firstGroup]]), strings: [...ctx.strings] };
  return jobs.jobs.length;
});

test("random job lists arrive whole and in order", () => {
  inc.reset();
  let seed = 5;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  let previous = [];
  let nextId = 1;
  for (let call = 1; call < 200; call++) {
    const now = previous.filter(() => rand() > 0.1);
    for (let k = Math.floor(rand() * 4); k > 0; k--) now.splice(Math.floor(rand() * (now.length + 1)), 0, [nextId++, 1 + Math.floor(rand() * 4)]);
    if (now.length && rand() < 0.3) {
      const i = Math.floor(rand() * now.length);
      now[i] = [now[i][0], now[i][1] + 1];
    }
    const [keep, fresh] = encode(previous, now);
    // u32 may arrive as signed numbers: send FRESH as -1 now and then.
    const sent = keep.map((k) => (k === FRESH && call % 2 ? -1 : k));
    const n = score({ strings: [`s${call}`] }, { generation: BigInt(call), base: BigInt(call === 1 ? 0 : call - 1) }, { keep: sent, fresh: jobList(fresh) }, []);
    assert.equal(n, now.length);
    assert.deepEqual(seen.jobs.map(([i, g]) => [i, g]), now, `call ${call}`);
    assert.deepEqual(seen.jobs.map(([, , grp]) => grp), now.map(([i, g]) => `group ${i} ${g}`));
    assert.equal(seen.strings.length, call);
    previous = now;
  }
});

test("nodes and running lists arrive whole", () => {
  inc.reset();
  let got;
  const place = inc.place((_ctx, _jobs, nodes, running) => {
    got = {
      nodes: nodes.nodes.map((n) => [n.id, nodes.gpus.slice(n.firstGpu, n.firstGpu + n.gpuCount)]),
      running: running.running.map((r, i) => [
        running.jobs.jobs[i].id,
        running.tasks.slice(r.firstTask, r.firstTask + r.taskCount).map((t) => [t.node, running.shares.slice(t.firstShare, t.firstShare + t.shareCount)]),
      ]),
    };
  });
  const call = (gen, base, nk, nodes, rk, runs) => {
    const nl = { nodes: [], gpus: [], labels: [] };
    for (const [id, gpus] of nodes) {
      nl.nodes.push({ id, firstGpu: nl.gpus.length, gpuCount: gpus.length, firstLabel: 0, labelCount: 0 });
      nl.gpus.push(...gpus);
    }
    const rl = { jobs: jobList(runs.map(([id]) => [id, 1])), running: [], tasks: [], shares: [] };
    for (const [, tasks] of runs) {
      rl.running.push({ firstTask: rl.tasks.length, taskCount: tasks.length });
      for (const [node, shares] of tasks) {
        rl.tasks.push({ node, firstShare: rl.shares.length, shareCount: shares.length });
        rl.shares.push(...shares);
      }
    }
    place({ strings: [] }, { generation: gen, base }, { keep: [], fresh: jobList([]) }, { keep: nk, fresh: nl }, { keep: rk, fresh: rl });
  };
  call(1n, 0n, [FRESH, FRESH], [[0, ["g0", "g1"]], [1, ["g2"]]], [FRESH], [[7, [[0, ["s0", "s1"]]]]]);
  assert.deepEqual(got.nodes, [[0, ["g0", "g1"]], [1, ["g2"]]]);
  assert.deepEqual(got.running, [[7, [[0, ["s0", "s1"]]]]]);
  call(2n, 1n, [1, FRESH], [[0, ["g9"]]], [0, FRESH], [[8, [[1, ["s2"]], [0, []]]]]);
  assert.deepEqual(got.nodes, [[1, ["g2"]], [0, ["g9"]]]);
  assert.deepEqual(got.running, [[7, [[0, ["s0", "s1"]]]], [8, [[1, ["s2"]], [0, []]]]]);
});

test("a 0.1 array of scored results is sent as scores", () => {
  inc.reset();
  const score = inc.score(() => [{ score: 3 }, { score: -1, tier: 2 }, { score: 0.5, note: "late" }, { score: 7, tier: 0, note: "" }]);
  const out = score({ strings: [] }, { generation: 1n, base: 0n }, { keep: [], fresh: jobList([]) }, []);
  assert.deepEqual(out, {
    scores: [3, -1, 0.5, 7],
    tiers: [{ job: 1, tier: 2 }, { job: 3, tier: 0 }],
    notes: [{ job: 2, note: "late" }, { job: 3, note: "" }],
  });
});

test("a plan written as for 0.1 is sent flat, and a placed as it is", () => {
  inc.reset();
  const plan = {
    starts: [
      { job: 7n, tasks: [{ node: 0, gpus: [{ index: 0, milli: 1000 }, { index: 1, milli: 1000 }], cpuMilli: 1000, memoryMib: 64n }, { node: 2, gpus: [], cpuMilli: 500, memoryMib: 32n }] },
      { job: 9n, tasks: [{ node: 1, gpus: [{ index: 3, milli: 250 }], cpuMilli: 100, memoryMib: 8n }] },
    ],
    pending: ["pending"],
    stoppedAt: 11n,
  };
  let answer = plan;
  const place = inc.place(() => answer);
  const empty = { keep: [], fresh: jobList([]) };
  const nodes = { keep: [], fresh: { nodes: [], gpus: [], labels: [] } };
  const runs = { keep: [], fresh: { jobs: jobList([]), running: [], tasks: [], shares: [] } };
  const out = place({ strings: [] }, { generation: 1n, base: 0n }, empty, nodes, runs);
  assert.deepEqual(out.starts, [{ job: 7n, firstTask: 0, taskCount: 2 }, { job: 9n, firstTask: 2, taskCount: 1 }]);
  assert.deepEqual(out.tasks.map((t) => [t.node, t.firstShare, t.shareCount, t.cpuMilli, t.memoryMib]), [
    [0, 0, 2, 1000, 64n],
    [2, 2, 0, 500, 32n],
    [1, 2, 1, 100, 8n],
  ]);
  assert.deepEqual(out.shares, [{ index: 0, milli: 1000 }, { index: 1, milli: 1000 }, { index: 3, milli: 250 }]);
  assert.deepEqual([out.pending, out.stoppedAt], [["pending"], 11n]);
  answer = out;
  assert.equal(place({ strings: [] }, { generation: 2n, base: 1n }, empty, nodes, runs), out);
});

test("an unchanged list is handed over again, whatever the last call did to it", () => {
  inc.reset();
  let ids;
  const reverse = inc.score((_ctx, jobs) => {
    ids = jobs.jobs.map((j) => [j.id, jobs.groups[j.firstGroup]]);
    jobs.jobs.reverse(); // a function that reorders its input in place
    return 0;
  });
  reverse({ strings: [] }, { generation: 1n, base: 0n }, { keep: [FRESH, FRESH], fresh: jobList([[1, 1], [2, 2]]) }, []);
  for (const call of [2n, 3n]) {
    reverse({ strings: [] }, { generation: call, base: call - 1n }, { keep: [0, 1], fresh: jobList([]) }, []);
    assert.deepEqual(ids, [[1, "group 1 1"], [2, "group 2 2"]]);
  }
  reverse({ strings: [] }, { generation: 4n, base: 3n }, { keep: [1, FRESH], fresh: jobList([[3, 1]]) }, []);
  assert.deepEqual(ids.map(([i]) => i), [2, 3]);
});

test("a bad delta or a call out of sequence throws and forgets", () => {
  for (const [keep, fresh] of [[[5], []], [[0, 0], []], [[FRESH], []], [[0], [[2, 1]]]]) {
    inc.reset();
    score({ strings: ["a"] }, { generation: 1n, base: 0n }, { keep: [FRESH], fresh: jobList([[1, 1]]) }, []);
    assert.throws(() => score({ strings: [] }, { generation: 2n, base: 1n }, { keep, fresh: jobList(fresh) }, []));
    assert.throws(() => score({ strings: [] }, { generation: 3n, base: 2n }, { keep: [0], fresh: jobList([]) }, []), /resend in full/);
  }
  inc.reset();
  score({ strings: ["a"] }, { generation: 1n, base: 0n }, { keep: [FRESH], fresh: jobList([[1, 1]]) }, []);
  assert.throws(() => score({ strings: [] }, { generation: 9n, base: 7n }, { keep: [0], fresh: jobList([]) }, []), /resend in full/);
  score({ strings: ["b"] }, { generation: 10n, base: 0n }, { keep: [FRESH], fresh: jobList([[2, 1]]) }, []);
  assert.deepEqual(seen.strings, ["b"]);
});
