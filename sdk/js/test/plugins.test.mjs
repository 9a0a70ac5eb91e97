// The template, the js-deadline example and the js-throw fixture, run as plain modules.
import { test } from "node:test";
import assert from "node:assert/strict";
import { call } from "./support.mjs";

const template = await import("../template/policy.js");
const deadline = await import("../../../examples/plugins/js-deadline/policy.js");
const thrower = await import("../../../tests/guest-fixtures/js-throw/policy.js");

const order = (out) => out.map((s, i) => [s.tier ?? 0, s.score, -i]).map((k, i) => ({ k, i }))
  .sort((a, b) => b.k[0] - a.k[0] || b.k[1] - a.k[1] || b.k[2] - a.k[2]).map((x) => x.i);

test("template: priority=high first, then fifo", () => {
  template.plugin.configure("{}");
  const { ctx, list, previous } = call(1796034000000, [{}, { labels: { priority: "high" } }, { labels: { priority: "low" } }, { labels: { priority: "high" } }]);
  const out = template.priority.score(ctx, list, previous);
  assert.equal(out.length, 4);
  assert.deepEqual(order(out), [1, 3, 0, 2]);
  assert.match(out[1].note, /priority=high/);
  assert.equal(template.plugin.metadata().name, "js-template");
  template.plugin.configure('{"key": "team", "value": "infra"}');
  assert.deepEqual(order(template.priority.score(...Object.values(call(1e12, [{}, { labels: { team: "infra" } }])))), [1, 0]);
  assert.throws(() => template.plugin.configure('{"label": "x"}'), /unknown config key "label"/);
  template.plugin.configure("{}");
});

test("js-deadline: bands, notes, config", () => {
  deadline.plugin.configure("{}");
  const now = Date.UTC(2026, 10, 30, 12);
  const iso = (ms) => new Date(ms).toISOString().replace(".000Z", "Z");
  const { ctx, list, previous } = call(now, [
    { name: "plain" },                                                         // 0 middle
    { name: "in 30 min", labels: { deadline: iso(now + 30 * 60e3) } },          // 1 top, highest
    { name: "past", labels: { deadline: iso(now - 60e3) } },                     // 2 bottom
    { name: "in 5 h (ms)", labels: { deadline: String(now + 5 * 3600e3) } },     // 3 top
    { name: "in 3 days", labels: { deadline: iso(now + 72 * 3600e3) } },        // 4 middle (beyond horizon)
    { name: "bad", labels: { deadline: "tomorrow" } },                           // 5 middle + note
    { name: "seconds", labels: { deadline: String(Math.floor(now / 1000)) } },   // 6 invalid (looks like seconds)
    { name: "past 2", labels: { deadline: "2026-11-01T00:00:00Z" } },            // 7 bottom
    { name: "exactly now", labels: { deadline: iso(now) } },                     // 8 top, = boost
  ]);
  const out = deadline.priority.score(ctx, list, previous);
  assert.equal(out.length, 9);
  assert.deepEqual(order(out), [8, 1, 3, 0, 4, 5, 6, 2, 7]);
  assert.equal(out[8].score, 1000);
  assert.ok(out[1].score > 979 && out[1].score < 980, String(out[1].score));
  assert.equal(out[2].tier, -1);
  assert.equal(out[2].note, `past its deadline (${iso(now - 60e3)}): moved to the bottom`);
  assert.equal(out[7].note, "past its deadline (2026-11-01T00:00:00Z): moved to the bottom");
  assert.match(out[5].note, /deadline label "tomorrow" is invalid/);
  assert.match(out[6].note, /is invalid/);
  assert.match(out[1].note, /in 30 min: moved up/);
  assert.equal(out[0].note, undefined);
  assert.equal(out[4].note, undefined);
  for (const s of out) assert.ok(Number.isFinite(s.score));
  for (const i of [0, 4, 5, 6]) assert.ok(out[i].score < 0 && out[i].tier === undefined);

  // A smaller horizon and boost.
  deadline.plugin.configure('{"horizon_h": 1, "boost": 10}');
  const small = deadline.priority.score(ctx, list, previous);
  assert.equal(small[8].score, 10);
  assert.ok(small[3].score < 0, "5 h away is beyond a 1 h horizon");
  assert.ok(Math.abs(small[1].score - 5) < 1e-9);
  assert.throws(() => deadline.plugin.configure('{"horizon": 2}'), /unknown config key "horizon" \(accepted: horizon_h, boost\)/);
  assert.throws(() => deadline.plugin.configure('{"horizon_h": 0}'), /horizon_h must be a positive number/);
  assert.throws(() => deadline.plugin.configure('{"boost": "big"}'), /must be a number/);
  deadline.plugin.configure("{}");

  // No job with a deadline: pure fifo, no strings allocated.
  const plain = call(now, [{}, {}, {}]);
  assert.deepEqual(order(deadline.priority.score(plain.ctx, plain.list, plain.previous)), [0, 1, 2]);
  // A job below tier -1 past its deadline keeps its lower tier.
  const low = call(now, [{ tier: -5, labels: { deadline: iso(now - 1) } }]);
  assert.equal(deadline.priority.score(low.ctx, low.list, low.previous)[0].tier, -5);
  assert.deepEqual(deadline.priority.score(ctx, { jobs: [], groups: [], labels: [] }, []), []);
});

test("js-throw: Error by default, string with mode=string", () => {
  const { ctx, list, previous } = call(1e12, [{}, {}]);
  thrower.plugin.configure("{}");
  assert.throws(() => thrower.priority.score(ctx, list, previous), (e) => e instanceof Error && e.message === "js-throw: refusing to score 2 jobs");
  thrower.plugin.configure('{"mode":"string"}');
  assert.throws(() => thrower.priority.score(ctx, list, previous), (e) => e === "js-throw: refusing to score 2 jobs");
  assert.throws(() => thrower.plugin.configure('{"mode":"number"}'), /mode must be/);
  assert.throws(() => thrower.plugin.configure('{"x":1}'), /unknown config key "x"/);
});
