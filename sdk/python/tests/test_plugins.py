"""Native unit tests for sdk/python/lib/gantry.py and the Python plugins' logic.

They run the plugin classes in plain CPython against bindings generated from wit/ (the
full-plugin world, so every app finds its interfaces). Needs the toolchain
(scripts/plugin-toolchains); skipped without it. From the repository root:

    python3 -m unittest discover -s sdk/python/tests -v
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PY = os.path.join(ROOT, "target", "toolchains", "py", "bin", "componentize-py")
BINDINGS = None


def setUpModule():
    global BINDINGS
    if not os.path.exists(PY):
        raise unittest.SkipTest("componentize-py not installed (run scripts/plugin-toolchains)")
    BINDINGS = tempfile.mkdtemp(prefix="gantry-pybind-")
    out = os.path.join(BINDINGS, "b")
    subprocess.run(
        [PY, "-d", os.path.join(ROOT, "wit", "0.1.0"), "-w", "full-plugin", "bindings", out],
        check=True,
        capture_output=True,
    )
    sys.path[:0] = [out, os.path.join(ROOT, "sdk", "python", "lib")]


def tearDownModule():
    if BINDINGS:
        shutil.rmtree(BINDINGS, ignore_errors=True)


def load(name, rel):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel, "app.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Cluster:
    """Builds a cycle and a job list the way the host does (interned strings, ranges)."""

    def __init__(self):
        from wit_world.imports import types

        self.t = types
        self.strings = []
        self.jobs, self.groups, self.labels = [], [], []
        self.user_gpus = []

    def sym(self, s):
        if s not in self.strings:
            self.strings.append(s)
        return self.strings.index(s)

    def job(self, user, gpus=1, gpu_milli=0, count=1, queue="dev", kind="batch", limit=0, labels=None):
        t = self.t
        fg, fl = len(self.groups), len(self.labels)
        self.groups.append(t.TaskGroup(count, gpus, gpu_milli, 10, 16, 0))
        for k, v in (labels or {}).items():
            self.labels.append(t.Label(self.sym(k), self.sym(v)))
        self.jobs.append(
            t.Job(
                len(self.jobs) + 1, self.sym("j"), self.sym(user), self.sym(user), self.sym(queue),
                0, 1000 + len(self.jobs), limit, t.JobKind[kind.upper()], True,
                fg, 1, fl, len(self.labels) - fl,
            )
        )
        return self

    def holding(self, user, milli):
        self.user_gpus.append(self.t.GpuUse(self.sym(user), milli))
        return self

    def ctx(self):
        t = self.t
        return t.Cycle(
            1, 5000, 7, list(self.strings), [], [], [], list(self.user_gpus), [], [],
            t.ClusterTotals(1, 4000, 4000, 16000, 65536),
        )

    def list(self):
        return self.t.JobList(list(self.jobs), list(self.groups), list(self.labels))


class GantryLib(unittest.TestCase):
    def test_ranges_and_gpus(self):
        import gantry

        c = Cluster().job("ann", gpus=2, count=2, labels={"team": "nlp", "prio": "hi"})
        c.job("ben", gpus=0, gpu_milli=250, count=3).holding("ann", 1500)
        ctx, jl = c.ctx(), c.list()
        self.assertEqual(gantry.labels(jl, jl.jobs[0], ctx), {"team": "nlp", "prio": "hi"})
        self.assertEqual(gantry.labels(jl, jl.jobs[1], ctx), {})
        self.assertEqual(len(gantry.tasks(jl, jl.jobs[1])), 1)
        self.assertEqual(gantry.gpu_milli(jl, jl.jobs[0]), 4000)
        self.assertEqual(gantry.gpu_milli(jl, jl.jobs[1]), 750)
        self.assertEqual(gantry.text(ctx, jl.jobs[1].user), "ben")
        self.assertEqual(gantry.gpus_held(ctx, "ann"), 1500)
        self.assertEqual(gantry.gpus_held(ctx, jl.jobs[0].user), 1500)
        self.assertEqual(gantry.gpus_held(ctx, "ben"), 0)
        self.assertEqual(gantry.fmt_gpus(1500), "1.5")
        self.assertEqual(gantry.fmt_duration(21600), "6h")
        self.assertEqual(gantry.fmt_duration(5430), "1h30m30s")

    def test_metadata_and_verdicts(self):
        import gantry
        from wit_world.exports import admission, plugin
        from wit_world.imports import types

        m = gantry.metadata("x", "1.0.0", ["priority", plugin.Stage.ADMISSION], "h")
        self.assertEqual(m.contract, "0.1.0")
        self.assertEqual(m.stages, [plugin.Stage.PRIORITY, plugin.Stage.ADMISSION])
        v = gantry.hold("held-by-policy", "m")
        self.assertIsInstance(v, admission.Verdict_Hold)
        self.assertEqual(v.value.code, types.ReasonCode.HELD_BY_POLICY)
        self.assertIsInstance(gantry.admit(), admission.Verdict_Admit)
        self.assertIsInstance(gantry.accept(), admission.SubmitVerdict_Accept)
        p = gantry.accept(queue="dev", labels={"a": "b"})
        self.assertEqual(p.value.labels, [("a", "b")])

    def test_parse_config(self):
        import gantry

        fields = {"n": 2, "names": ["a"], "on": False, "q": "dev", "f": 0.5}
        self.assertEqual(gantry.parse_config("", fields), fields)
        self.assertEqual(gantry.parse_config('{"n": 3.0, "f": 1}', fields)["n"], 3)
        for cfg, msg in [
            ("[1]", "invalid config: expected a JSON object, got a list"),
            ('{"x": 1}', "invalid config: x is not a known field (known: f, n, names, on, q)"),
            ('{"n": "2"}', "invalid config: n must be an integer, got a string"),
            ('{"n": true}', "invalid config: n must be an integer, got a boolean"),
            ('{"names": ["a", 2]}', "invalid config: names[1] must be a string, got a number"),
            ('{"on": 1}', "invalid config: on must be true or false, got a number"),
        ]:
            with self.assertRaises(gantry.Err) as e:
                gantry.parse_config(cfg, fields)
            self.assertEqual(e.exception.value, msg)
        with self.assertRaises(gantry.Err) as e:
            gantry.parse_config("{", fields)
        self.assertTrue(e.exception.value.startswith("invalid config: not JSON"))


class Interns(unittest.TestCase):
    def setUp(self):
        self.app = load("interns_app", "examples/plugins/python-interns")
        self.plugin, self.adm = self.app.Plugin(), self.app.Admission()
        self.plugin.configure('{"interns": ["bob"]}')

    def submit(self, c):
        return self.adm.check_submit(c.ctx(), c.list())

    def test_config(self):
        import gantry

        with self.assertRaises(gantry.Err) as e:
            self.plugin.configure('{"intern": ["bob"]}')
        self.assertIn("intern is not a known field", e.exception.value)
        with self.assertRaises(gantry.Err) as e:
            self.plugin.configure('{"max_gpus": -1}')
        self.assertEqual(e.exception.value, "invalid config: max_gpus must be >= 0, got -1")

    def test_submit(self):
        from wit_world.exports import admission as a

        v = self.submit(Cluster().job("bob", queue="default"))
        self.assertEqual(v, a.SubmitVerdict_Reject("interns may only use queue dev; job asked for queue default"))
        v = self.submit(Cluster().job("bob", gpus=3))
        self.assertEqual(v, a.SubmitVerdict_Reject("interns may hold at most 2 GPUs at once; this job needs 3"))
        v = self.submit(Cluster().job("ann", kind="interactive", limit=21600, queue="x"))
        self.assertEqual(
            v,
            a.SubmitVerdict_Reject(
                "interactive jobs may run at most 4h (asked 6h); use a batch job for longer work"
            ),
        )
        v = self.submit(Cluster().job("ann", kind="interactive", limit=0))
        self.assertEqual(v.value, "interactive jobs may run at most 4h (asked no limit); use a batch job for longer work")
        self.assertIsInstance(self.submit(Cluster().job("ann", kind="interactive", limit=14400)), a.SubmitVerdict_Accept)
        self.assertIsInstance(self.submit(Cluster().job("bob", gpus=2)), a.SubmitVerdict_Accept)
        self.assertIsInstance(self.submit(Cluster().job("ann", gpus=8, queue="x")), a.SubmitVerdict_Accept)

    def test_admit(self):
        from wit_world.exports import admission as a

        c = Cluster().job("bob").job("ann", gpus=4).job("bob").job("bob").job("bob", gpus=0, gpu_milli=0)
        v = self.adm.admit(c.ctx(), c.list())
        self.assertEqual([type(x).__name__ for x in v], ["Verdict_Admit"] * 3 + ["Verdict_Hold", "Verdict_Admit"])
        self.assertEqual(
            v[3].value.message,
            "intern bob holds 2 of 2 GPUs (0 running, 2 admitted this cycle); this job needs 1 more",
        )
        c = Cluster().job("bob").job("bob", gpus=0, gpu_milli=500).holding("bob", 1500).holding("carol", 2000)
        v = self.adm.admit(c.ctx(), c.list())
        self.assertIsInstance(v[0], a.Verdict_Hold)
        self.assertEqual(v[0].value.message, "intern bob holds 1.5 of 2 GPUs; this job needs 1 more")
        self.assertIsInstance(v[1], a.Verdict_Admit)


class Template(unittest.TestCase):
    def test_smallest_first(self):
        app = load("template_app", "sdk/python/template")
        app.Plugin().configure("{}")
        c = Cluster().job("a", gpus=4).job("b", gpus=0, gpu_milli=500).job("c", gpus=1, count=2)
        out = app.Priority().score(c.ctx(), c.list(), [0.0] * 3)
        self.assertEqual([s.score for s in out], [-4000.0, -500.0, -2000.0])


class Raise(unittest.TestCase):
    def test_modes(self):
        import gantry

        app = load("raise_app", "tests/guest-fixtures/python-raise")
        p, pr = app.Plugin(), app.Priority()
        c = Cluster().job("a").job("b")
        p.configure("{}")
        with self.assertRaisesRegex(RuntimeError, "python-raise: refusing to score 2 jobs"):
            pr.score(c.ctx(), c.list(), [0.0, 0.0])
        p.configure('{"mode": "err"}')
        with self.assertRaises(gantry.Err) as e:
            pr.score(c.ctx(), c.list(), [0.0, 0.0])
        self.assertEqual(e.exception.value, "python-raise: returning an error")
        with self.assertRaises(gantry.Err):
            p.configure('{"mode": "boom"}')


if __name__ == "__main__":
    unittest.main()
