"""Native unit tests of sdk/python/lib/gantry_incremental.py (contract 0.2's view): random
sequences of lists, encoded as the host does (keep an unchanged element by its index in
the previous call's list, send the others fresh), reach the decorated method whole and
in order; a delta that does not fit, or a call out of sequence, is an error that forgets
everything. Plain Python: records are stand-ins with the generated types' field names.
"""

import os
import collections
import random
import sys
import unittest
from dataclasses import dataclass, field

sys.dont_write_bytecode = True
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python", "lib"))

import gantry_incremental as inc  # noqa: E402

FRESH = inc.FRESH


@dataclass
class Job:
    id: int
    gpus: int
    first_group: int = 0
    group_count: int = 0
    first_label: int = 0
    label_count: int = 0


@dataclass
class JobList:
    jobs: list
    groups: list
    labels: list


@dataclass
class Node:
    id: int
    first_gpu: int = 0
    gpu_count: int = 0
    first_label: int = 0
    label_count: int = 0


@dataclass
class NodeList:
    nodes: list
    gpus: list
    labels: list


@dataclass
class Running:
    start_ms: int
    first_task: int = 0
    task_count: int = 0


@dataclass
class Slot:
    node: int
    first_share: int = 0
    share_count: int = 0


@dataclass
class RunningList:
    jobs: JobList
    running: list
    tasks: list
    shares: list


@dataclass
class Delta:
    keep: list
    fresh: object


@dataclass
class Sync:
    generation: int
    base: int


@dataclass
class Ctx:
    strings: list = field(default_factory=list)


def job_list(jobs):
    """A flat job-list of (id, gpus) pairs: one group and one label each."""
    out = JobList([], [], [])
    for i, g in jobs:
        out.jobs.append(Job(i, g, len(out.groups), 1, len(out.labels), 1))
        out.groups.append(("group", i, g))
        out.labels.append(("label", i))
    return out


def encode(previous, now):
    """keep and fresh as the host makes them."""
    at = {x: k for k, x in enumerate(previous)}
    keep, fresh = [], []
    for x in now:
        if x in at:
            keep.append(at.pop(x))
        else:
            keep.append(FRESH)
            fresh.append(x)
    return keep, fresh


class Seen:
    """A stage whose methods record what they were handed."""

    @inc.score
    def score(self, ctx, jobs, previous):
        self.jobs = [(j.id, j.gpus, jobs.groups[j.first_group], jobs.labels[j.first_label]) for j in jobs.jobs]
        self.strings = list(ctx.strings)
        return len(jobs.jobs)

    @inc.place
    def place(self, ctx, jobs, nodes, running):
        self.nodes = [(n.id, nodes.gpus[n.first_gpu : n.first_gpu + n.gpu_count]) for n in nodes.nodes]
        self.running = [
            (
                running.jobs.jobs[i].id,
                r.start_ms,
                [
                    (t.node, running.shares[t.first_share : t.first_share + t.share_count])
                    for t in running.tasks[r.first_task : r.first_task + r.task_count]
                ],
            )
            for i, r in enumerate(running.running)
        ]
        return inc.Plan([])


class Placer:
    """A 0.1-style placement method whose plan the decorator sends flat."""

    def __init__(self, plan):
        self.plan = plan

    @inc.place
    def place(self, ctx, jobs, nodes, running):
        return self.plan


class IncrementalTest(unittest.TestCase):
    def setUp(self):
        inc.reset()

    def test_a_0_1_list_of_scored_results_is_sent_as_scores(self):
        Scored = collections.namedtuple("Scored", ["score", "tier", "note"])

        class Scorer:
            @inc.score
            def score(self, ctx, jobs, previous):
                return [Scored(3, None, None), Scored(-1, 2, None), Scored(0.5, None, "late"), Scored(7, 0, "")]

        out = Scorer().score(Ctx(), Sync(1, 0), Delta([], job_list([])), [])
        self.assertEqual(out.scores, [3.0, -1.0, 0.5, 7.0])
        self.assertEqual([(t.job, t.tier) for t in out.tiers], [(1, 2), (3, 0)])
        self.assertEqual([(n.job, n.note) for n in out.notes], [(2, "late"), (3, "")])

    def test_a_plan_written_as_for_0_1_is_sent_flat(self):
        Share = collections.namedtuple("Share", ["index", "milli"])
        plan = inc.Plan(
            [
                inc.Start(7, [inc.TaskAllocation(0, [Share(0, 1000), Share(1, 1000)], 1000, 64),
                              inc.TaskAllocation(2, [], 500, 32)]),
                inc.Start(9, [inc.TaskAllocation(1, [Share(3, 250)], 100, 8)]),
            ],
            ["pending"],
            11,
        )
        empty = Delta([], job_list([]))
        out = Placer(plan).place(Ctx(), Sync(1, 0), empty, Delta([], NodeList([], [], [])), Delta([], RunningList(JobList([], [], []), [], [], [])))
        self.assertEqual([(s.job, s.first_task, s.task_count) for s in out.starts], [(7, 0, 2), (9, 2, 1)])
        self.assertEqual(
            [(t.node, t.first_share, t.share_count, t.cpu_milli, t.memory_mib) for t in out.tasks],
            [(0, 0, 2, 1000, 64), (2, 2, 0, 500, 32), (1, 2, 1, 100, 8)],
        )
        self.assertEqual([(g.index, g.milli) for g in out.shares], [(0, 1000), (1, 1000), (3, 250)])
        self.assertEqual((out.pending, out.stopped_at), (["pending"], 11))
        # A `placed` is sent as it is.
        again = Placer(out).place(Ctx(), Sync(2, 1), empty, Delta([], NodeList([], [], [])), Delta([], RunningList(JobList([], [], []), [], [], [])))
        self.assertIs(again, out)

    def test_random_job_lists_arrive_whole(self):
        rng = random.Random(5)
        seen, previous, next_id = Seen(), [], 1
        for call in range(1, 200):
            now = [x for x in previous if rng.random() > 0.1]
            for _ in range(rng.randrange(4)):
                now.insert(rng.randrange(len(now) + 1), (next_id, rng.randrange(1, 5)))
                next_id += 1
            if now and rng.random() < 0.3:
                i = rng.randrange(len(now))
                now[i] = (now[i][0], now[i][1] + 1)  # changed: sent fresh
            keep, fresh = encode(previous, now)
            base = 0 if call == 1 else call - 1
            n = seen.score(Ctx([f"s{call}"]), Sync(call, base), Delta(keep, job_list(fresh)), [])
            self.assertEqual(n, len(now))
            self.assertEqual([(i, g) for i, g, _, _ in seen.jobs], now, f"call {call}")
            self.assertEqual([grp for _, _, grp, _ in seen.jobs], [("group", i, g) for i, g in now])
            self.assertEqual(len(seen.strings), call, "the string table grows by each call's strings")
            previous = now

    def test_nodes_and_running_lists_arrive_whole(self):
        seen = Seen()

        def call(gen, base, nodes_keep, nodes, running_keep, running):
            nl = NodeList([], [], [])
            for i, gpus in nodes:
                nl.nodes.append(Node(i, len(nl.gpus), len(gpus), 0, 0))
                nl.gpus.extend(gpus)
            rl = RunningList(job_list([(i, 1) for i, _, _ in running]), [], [], [])
            for _, start, tasks in running:
                rl.running.append(Running(start, len(rl.tasks), len(tasks)))
                for node, shares in tasks:
                    rl.tasks.append(Slot(node, len(rl.shares), len(shares)))
                    rl.shares.extend(shares)
            seen.place(Ctx(), Sync(gen, base), Delta([], job_list([])), Delta(nodes_keep, nl), Delta(running_keep, rl))

        call(1, 0, [FRESH, FRESH], [(0, ["g0", "g1"]), (1, ["g2"])], [FRESH], [(7, 100, [(0, ["s0", "s1"])])])
        self.assertEqual(seen.nodes, [(0, ["g0", "g1"]), (1, ["g2"])])
        self.assertEqual(seen.running, [(7, 100, [(0, ["s0", "s1"])])])
        # Node 1 kept and moved first; node 0 changed; a second running job with two tasks.
        call(2, 1, [1, FRESH], [(0, ["g9"])], [0, FRESH], [(8, 200, [(1, ["s2"]), (0, [])])])
        self.assertEqual(seen.nodes, [(1, ["g2"]), (0, ["g9"])])
        self.assertEqual(seen.running, [(7, 100, [(0, ["s0", "s1"])]), (8, 200, [(1, ["s2"]), (0, [])])])

    def test_an_unchanged_list_is_handed_over_again_whatever_the_last_call_did_to_it(self):
        class Reverser:
            @inc.score
            def score(self, ctx, jobs, previous):
                self.ids = [(j.id, jobs.groups[j.first_group]) for j in jobs.jobs]
                jobs.jobs.reverse()  # a method that reorders its input in place
                return 0

        r = Reverser()
        r.score(Ctx(), Sync(1, 0), Delta([FRESH, FRESH], job_list([(1, 1), (2, 2)])), [])
        for call in (2, 3):
            r.score(Ctx(), Sync(call, call - 1), Delta([0, 1], job_list([])), [])
            self.assertEqual(r.ids, [(1, ("group", 1, 1)), (2, ("group", 2, 2))], f"call {call}")
        r.score(Ctx(), Sync(4, 3), Delta([1, FRESH], job_list([(3, 1)])), [])
        self.assertEqual([i for i, _ in r.ids], [2, 3])

    def test_a_bad_delta_or_a_call_out_of_sequence_is_an_error_that_forgets(self):
        seen = Seen()
        seen.score(Ctx(["a"]), Sync(1, 0), Delta([FRESH], job_list([(1, 1)])), [])
        for keep, fresh in [([5], []), ([0, 0], []), ([FRESH], []), ([0], [(2, 1)])]:
            inc.reset()
            seen.score(Ctx(["a"]), Sync(1, 0), Delta([FRESH], job_list([(1, 1)])), [])
            with self.assertRaises(inc.Err):
                seen.score(Ctx(), Sync(2, 1), Delta(keep, job_list(fresh)), [])
            # Forgotten: only a full resend is accepted now.
            with self.assertRaises(inc.Err):
                seen.score(Ctx(), Sync(3, 2), Delta([0], job_list([])), [])
        inc.reset()
        seen.score(Ctx(["a"]), Sync(1, 0), Delta([FRESH], job_list([(1, 1)])), [])
        with self.assertRaises(inc.Err):
            seen.score(Ctx(), Sync(9, 7), Delta([0], job_list([])), [])
        seen.score(Ctx(["b"]), Sync(10, 0), Delta([FRESH], job_list([(2, 1)])), [])
        self.assertEqual(seen.strings, ["b"], "a full resend starts the string table anew")


if __name__ == "__main__":
    unittest.main()
