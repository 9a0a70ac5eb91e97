// Unit tests of sdk/js/lib/gantry.js and the JavaScript plugins, under plain node 20:
//   node --import ./sdk/js/test/register.mjs --test sdk/js/test/*.test.mjs
// They check logic only; that the components build and load is checked by building them
// (scripts/build-plugin-examples) and loading them into a daemon.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as g from "../lib/gantry.js";
import { lines } from "./host-stub.mjs";
import { call } from "./support.mjs";

test("metadata", () => {
  assert.deepEqual(g.metadata("x", "1.2.3", ["priority"], "h"), { name: "x", version: "1.2.3", contract: "0.1.0", stages: ["priority"], configHint: "h" });
  assert.equal(g.metadata("x", "1", ["admission"]).configHint, "");
  assert.throws(() => g.metadata("x", "1", []), /non-empty/);
  assert.throws(() => g.metadata("x", "1", ["prio"]), /unknown stage "prio"/);
});

test("parseConfig", () => {
  const d = { horizon_h: 24, boost: 1000, name: "a", on: true, list: [], any: null };
  assert.deepEqual(g.parseConfig("{}", d), d);
  assert.deepEqual(g.parseConfig("", d), d);
  assert.equal(g.parseConfig('{"boost": 5}', d).boost, 5);
  assert.equal(g.parseConfig('{"any": {"x": 1}}', d).any.x, 1);
  assert.throws(() => g.parseConfig('{"bost": 5}', d), { message: 'unknown config key "bost" (accepted: horizon_h, boost, name, on, list, any)' });
  assert.throws(() => g.parseConfig('{"x": 1}', {}), /unknown config key "x" \(accepted: none\)/);
  assert.throws(() => g.parseConfig('{"boost": "5"}', d), /config key "boost" must be a number, got a string/);
  assert.throws(() => g.parseConfig('{"boost": null}', d), /must be a number, got null/);
  assert.throws(() => g.parseConfig('{"list": {}}', d), /must be an array/);
  assert.throws(() => g.parseConfig("[1]", d), /must be a JSON object, got an array/);
  assert.throws(() => g.parseConfig("{", d), /config is not valid JSON/);
  assert.deepEqual(d.boost, 1000, "defaults are not modified");
});

test("symbols, ranges, labels, gpuMilli", () => {
  const { ctx, list } = call(1e12, [
    { labels: { a: "1", constructor: "x" }, groups: [{ count: 2, gpus: 2 }, { count: 3, gpuMilli: 250 }] },
    { labels: { a: "2" } },
  ]);
  const [j0, j1] = list.jobs;
  assert.equal(g.text(ctx, j0.user), "alice");
  assert.throws(() => g.text(ctx, 999), /symbol 999/);
  assert.equal(g.symbol(ctx, "a"), ctx.strings.indexOf("a"));
  assert.equal(g.symbol(ctx, "nope"), undefined);
  assert.equal(g.tasks(list, j0).length, 2);
  assert.equal(g.tasks(list, j1)[0].gpus, 1);
  assert.equal(g.taskCount(list, j0), 5);
  assert.equal(g.gpuMilli(list, j0), 4750);
  assert.equal(g.gpuMilli(list, j1), 1000);
  assert.deepEqual({ ...g.labels(ctx, list, j0) }, { a: "1", constructor: "x" });
  assert.deepEqual({ ...g.labels(ctx, list, j1) }, { a: "2" });
  assert.equal(g.label(ctx, list, j1, "a"), "2");
  assert.equal(g.label(ctx, list, j1, g.symbol(ctx, "a")), "2");
  assert.equal(g.label(ctx, list, j1, "constructor"), undefined);
});

test("results: scored, reason, verdicts", () => {
  assert.deepEqual(g.scored(1.5), { score: 1.5, tier: undefined, note: undefined });
  assert.deepEqual(g.scored(2, { tier: -1, note: "n" }), { score: 2, tier: -1, note: "n" });
  assert.deepEqual(g.hold("quota"), { tag: "hold", val: { code: "held-by-policy", message: "quota" } });
  assert.deepEqual(g.admit(), { tag: "admit" });
  assert.deepEqual(g.reject("no"), { tag: "reject", val: "no" });
  assert.deepEqual(g.acceptWith({ queue: "q" }).val, { queue: "q", tier: undefined, timeLimitS: undefined, preemptible: undefined, labels: [] });
  assert.throws(() => g.reason("nope", "x"), /unknown reason code "nope"/);
});

test("parseTime and formatTime", () => {
  const t = Date.UTC(2026, 11, 1, 18);
  assert.equal(g.parseTime("2026-12-01T18:00:00Z"), t);
  assert.equal(g.parseTime("2026-12-01T18:00Z"), t);
  assert.equal(g.parseTime("2026-12-01t18:00:00z"), t);
  assert.equal(g.parseTime("2026-12-01 18:00:00Z"), t);
  assert.equal(g.parseTime("2026-12-01T20:00:00+02:00"), t);
  assert.equal(g.parseTime("2026-12-01T13:30:00-0430"), t);
  assert.equal(g.parseTime("2026-12-01T18:00:00.250Z"), t + 250);
  assert.equal(g.parseTime("2026-12-01T18:00:00.123456789Z"), t + 123);
  assert.equal(g.parseTime(" 1796148000000 "), 1796148000000);
  for (const bad of ["", "soon", "2026-12-01", "2026-12-01T18:00:00", "2026-13-01T00:00Z", "2026-02-29T00:00Z",
    "2026-12-01T24:00Z", "2026-12-01T18:60Z", "2026-12-01T18:00:00+25:00", "Dec 1 2026 18:00 UTC", "-5", "1e12"]) {
    assert.equal(g.parseTime(bad), undefined, bad);
  }
  assert.equal(g.parseTime("2028-02-29T00:00Z"), Date.UTC(2028, 1, 29));
  assert.equal(g.formatTime(t), "2026-12-01T18:00:00Z");
  assert.equal(g.formatTime(t + 5), "2026-12-01T18:00:00.005Z");
});

test("rng is deterministic per seed and in [0, 1)", () => {
  const a = g.rng(42), b = g.rng(42), c = g.rng(43);
  const xs = Array.from({ length: 1000 }, () => a());
  assert.deepEqual(xs.slice(0, 5), Array.from({ length: 5 }, () => b()));
  assert.notEqual(xs[0], c());
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  assert.ok(Math.abs(xs.reduce((s, x) => s + x, 0) / xs.length - 0.5) < 0.05);
  assert.equal(g.rng(2n ** 63n)(), g.rng(2 ** 63)());
});

test("log goes to the host import", () => {
  g.log("info", "hi");
  assert.deepEqual(lines.at(-1), ["info", "hi"]);
  assert.throws(() => g.log("loud", "x"), /unknown log level/);
});
