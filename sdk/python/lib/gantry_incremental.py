"""Contract 0.2 (``gantry:policy@0.2.0``) for Python plugins: the SDK keeps the view.

In 0.2 the host sends each call only what changed since the plugin's previous call
(``wit/0.2.0/README.md``): a ``sync-point`` and, for every list, a delta (``keep``: for
each element, the index of an unchanged element of the previous call's list, or
``0xffffffff`` for the next element of ``fresh``). This module keeps the lists and the
string table between calls and hands your method the whole ``job-list``, ``node-list``
and ``running-list`` of 0.1, so a stage is written exactly as for 0.1 (``gantry.py``'s
helpers work unchanged). Decorate each stage method with the decorator of its name::

    from wit_world import exports
    import gantry, gantry_incremental as incremental

    class Priority(exports.Priority):
        @incremental.score
        def score(self, ctx, jobs, previous):       # the 0.1 signature
            return [gantry.scored(-gantry.gpu_milli(jobs, j)) for j in jobs.jobs]

and build against ``wit/0.2.0`` with ``gantry.metadata(..., contract="0.2.0")``.

``score`` answers 0.2's ``scores`` (a list of numbers, and the tier overrides and notes
by job index): return the 0.1 list of scored results (``gantry.scored(...)``: anything
with ``score``, ``tier`` and ``note``), and the decorator makes it one.

``place`` answers 0.2's flat ``placed`` (``wit/0.2.0/stages.wit``). Return one (build it
with :func:`placed`), or a plan written as for 0.1, which the decorator flattens: any
object with ``starts``, ``pending`` and ``stopped_at``, each start with ``job`` and
``tasks``, each task with ``node``, ``gpus`` (each with ``index`` and ``milli``),
``cpu_milli`` and ``memory_mib``. The 0.2 world has no nested ``Plan``, ``Start`` or
``TaskAllocation`` classes, so this module offers them (:class:`Plan`, :class:`Start`,
:class:`TaskAllocation`); ``GpuShare`` and ``Pending`` are the world's.

What the host sent is rebuilt by moving the records it kept (their ``first-*`` offsets
are rewritten in place); nothing is copied. A delta that does not fit (an index out of
range or kept twice, a call out of sequence) raises ``Err`` and forgets everything: the
host then resends in full. So does any exception your method raises.
"""

import collections
import functools

try:  # inside a component
    from componentize_py_types import Err
except ImportError:  # plain Python (unit tests)
    from gantry import Err

__all__ = [
    "check_submit",
    "admit",
    "score",
    "place",
    "preempt",
    "reset",
    "placed",
    "scores",
    "Plan",
    "Start",
    "TaskAllocation",
    "FRESH",
]

#: ``keep`` entry meaning "the next element of ``fresh``".
FRESH = 0xFFFFFFFF

_view = {"generation": 0, "strings": [], "lists": {}, "flat": {}}

#: A plan written as for 0.1 (``place`` may return one; the decorator flattens it).
Plan = collections.namedtuple("Plan", ["starts", "pending", "stopped_at"], defaults=[(), None])
#: A start of a :class:`Plan`: one :class:`TaskAllocation` per task, in task order.
Start = collections.namedtuple("Start", ["job", "tasks"])
#: Where one task of a start runs: ``gpus`` are ``GpuShare``s (or anything with ``index``
#: and ``milli``).
TaskAllocation = collections.namedtuple("TaskAllocation", ["node", "gpus", "cpu_milli", "memory_mib"])


def _flat_types():
    """The world's ``placed``, ``start-slot``, ``task-slot`` and ``gpu-share`` classes (plain
    stand-ins outside a component, for unit tests)."""
    try:
        from wit_world.exports.placement import Placed, StartSlot
        from wit_world.imports.types import GpuShare, TaskSlot
    except ImportError:
        Placed = collections.namedtuple("Placed", ["starts", "tasks", "shares", "pending", "stopped_at"])
        StartSlot = collections.namedtuple("StartSlot", ["job", "first_task", "task_count"])
        TaskSlot = collections.namedtuple(
            "TaskSlot", ["node", "first_share", "share_count", "cpu_milli", "memory_mib"]
        )
        GpuShare = collections.namedtuple("GpuShare", ["index", "milli"])
    return Placed, StartSlot, TaskSlot, GpuShare


def _scores_types():
    """The world's ``scores``, ``tier-override`` and ``job-note`` classes (plain stand-ins
    outside a component, for unit tests)."""
    try:
        from wit_world.exports.priority import JobNote, Scores, TierOverride
    except ImportError:
        Scores = collections.namedtuple("Scores", ["scores", "tiers", "notes"])
        TierOverride = collections.namedtuple("TierOverride", ["job", "tier"])
        JobNote = collections.namedtuple("JobNote", ["job", "note"])
    return Scores, TierOverride, JobNote


def scores(scored):
    """0.2's ``scores`` from a 0.1 list of scored results (each with ``score``, ``tier``
    and ``note``; ``gantry.scored`` makes them)."""
    Scores, TierOverride, JobNote = _scores_types()
    return Scores(
        [float(s.score) for s in scored],
        [TierOverride(i, s.tier) for i, s in enumerate(scored) if s.tier is not None],
        [JobNote(i, s.note) for i, s in enumerate(scored) if s.note is not None],
    )


def _as_scores(answer):
    """A method's answer as ``scores``: a list is made one; anything else is sent as it is
    (the host's lowering names what is wrong with it)."""
    return scores(answer) if isinstance(answer, (list, tuple)) else answer


def placed(starts=(), pending=(), stopped_at=None):
    """0.2's ``placed`` from starts written as for 0.1 (see :class:`Start`): each start's
    tasks and their GPU shares go into one flat list each, each start and task naming its
    range."""
    Placed, StartSlot, TaskSlot, GpuShare = _flat_types()
    slots, tasks, shares = [], [], []
    for s in starts:
        slots.append(StartSlot(s.job, len(tasks), len(s.tasks)))
        for t in s.tasks:
            tasks.append(TaskSlot(t.node, len(shares), len(t.gpus), t.cpu_milli, t.memory_mib))
            shares.extend(GpuShare(g.index, g.milli) for g in t.gpus)
    return Placed(slots, tasks, shares, list(pending), stopped_at)


def _as_placed(plan):
    """A method's answer as ``placed``: as it is when it already is one (or is no plan at
    all: the host's lowering names what is wrong with it)."""
    if hasattr(plan, "shares") or not hasattr(plan, "starts"):
        return plan
    return placed(plan.starts, plan.pending, plan.stopped_at)


def reset():
    """Forgets every list and the string table (the host resends in full next)."""
    _view["generation"] = 0
    _view["strings"] = []
    _view["lists"] = {}
    _view["flat"] = {}


def _unchanged(slot, keep, fresh_count):
    """Whether a delta keeps ``slot``'s list exactly as it was (a quiet cluster): then the
    previous call's flat lists are handed over again (copied: a method may sort them)."""
    old = _view["lists"].get(slot)
    return (
        fresh_count == 0
        and slot in _view["flat"]
        and old is not None
        and len(keep) == len(old)
        and list(keep) == list(range(len(old)))
    )


def _remember(slot, *parts):
    _view["flat"][slot] = tuple(list(p) for p in parts)


def _again(slot):
    return [list(p) for p in _view["flat"][slot]]


def _begin(ctx, sync):
    """Checks the call's sync point and gives ``ctx`` the whole string table."""
    if sync.base == 0:
        reset()
    elif sync.base != _view["generation"]:
        have = _view["generation"]
        reset()
        raise Err(f"the plugin's view is at call {have}, the host sent a delta from call {sync.base}: resend in full")
    _view["strings"].extend(ctx.strings)
    ctx.strings = _view["strings"]


def _apply(slot, keep, fresh):
    """The list of ``slot`` after the delta (``fresh``: the new elements, in order)."""
    old = _view["lists"].get(slot, [])
    taken = bytearray(len(old))
    out = []
    fresh = iter(fresh)
    for k in keep:
        if k == FRESH:
            item = next(fresh, None)
            if item is None:
                raise Err("a delta names more fresh elements than it carries")
            out.append(item)
        elif k < len(old) and not taken[k]:
            taken[k] = 1
            out.append(old[k])
        else:
            raise Err(f"a delta keeps element {k} of a previous list of {len(old)} (out of range or twice)")
    if next(fresh, None) is not None:
        raise Err("a delta carries fresh elements it does not place")
    _view["lists"][slot] = out
    return out


def _span(items, first, count):
    return items[first : first + count]


def _job_items(fl):
    return [(j, _span(fl.groups, j.first_group, j.group_count), _span(fl.labels, j.first_label, j.label_count)) for j in fl.jobs]


def _job_list(make, items):
    jobs, groups, labels = [], [], []
    for job, g, lab in items:
        job.first_group, job.group_count = len(groups), len(g)
        job.first_label, job.label_count = len(labels), len(lab)
        groups.extend(g)
        labels.extend(lab)
        jobs.append(job)
    return make(jobs, groups, labels)


def _jobs(slot, delta):
    make = type(delta.fresh)
    if _unchanged(slot, delta.keep, len(delta.fresh.jobs)):
        return make(*_again(slot))
    out = _job_list(make, _apply(slot, delta.keep, _job_items(delta.fresh)))
    _remember(slot, out.jobs, out.groups, out.labels)
    return out


def _nodes(slot, delta):
    fl = delta.fresh
    if _unchanged(slot, delta.keep, len(fl.nodes)):
        return type(fl)(*_again(slot))
    fresh = [(n, _span(fl.gpus, n.first_gpu, n.gpu_count), _span(fl.labels, n.first_label, n.label_count)) for n in fl.nodes]
    nodes, gpus, labels = [], [], []
    for node, g, lab in _apply(slot, delta.keep, fresh):
        node.first_gpu, node.gpu_count = len(gpus), len(g)
        node.first_label, node.label_count = len(labels), len(lab)
        gpus.extend(g)
        labels.extend(lab)
        nodes.append(node)
    _remember(slot, nodes, gpus, labels)
    return type(fl)(nodes, gpus, labels)


def _running(slot, delta):
    fl = delta.fresh
    if _unchanged(slot, delta.keep, len(fl.running)):
        jobs, groups, labels, running, tasks, shares = _again(slot)
        return type(fl)(type(fl.jobs)(jobs, groups, labels), running, tasks, shares)
    jobs = _job_items(fl.jobs)
    fresh = []
    for i, r in enumerate(fl.running):
        tasks = [(t, _span(fl.shares, t.first_share, t.share_count)) for t in _span(fl.tasks, r.first_task, r.task_count)]
        fresh.append((jobs[i] if i < len(jobs) else None, r, tasks))
    items = _apply(slot, delta.keep, fresh)
    running, tasks, shares = [], [], []
    for _, r, ts in items:
        r.first_task, r.task_count = len(tasks), len(ts)
        for t, sh in ts:
            t.first_share, t.share_count = len(shares), len(sh)
            shares.extend(sh)
            tasks.append(t)
        running.append(r)
    job_list = _job_list(type(fl.jobs), [j for j, _, _ in items if j is not None])
    _remember(slot, job_list.jobs, job_list.groups, job_list.labels, running, tasks, shares)
    return type(fl)(job_list, running, tasks, shares)


def _guarded(call):
    try:
        return call()
    except BaseException:
        reset()
        raise


def _finish(sync, result):
    _view["generation"] = sync.generation
    return result


def check_submit(method):
    """``check_submit(self, ctx, job)`` of 0.1 as 0.2's ``check-submit`` (the job comes whole)."""

    @functools.wraps(method)
    def wrapper(self, ctx, sync, job):
        _begin(ctx, sync)
        return _finish(sync, _guarded(lambda: method(self, ctx, job)))

    return wrapper


def admit(method):
    """``admit(self, ctx, jobs)`` of 0.1 as 0.2's ``admit``."""

    @functools.wraps(method)
    def wrapper(self, ctx, sync, delta):
        _begin(ctx, sync)
        return _finish(sync, _guarded(lambda: method(self, ctx, _jobs("admit", delta))))

    return wrapper


def score(method):
    """``score(self, ctx, jobs, previous)`` of 0.1 as 0.2's ``score``; its list of scored
    results is sent as ``scores`` (:func:`scores`)."""

    @functools.wraps(method)
    def wrapper(self, ctx, sync, delta, previous):
        _begin(ctx, sync)
        return _finish(
            sync, _guarded(lambda: _as_scores(method(self, ctx, _jobs("score", delta), previous)))
        )

    return wrapper


def place(method):
    """``place(self, ctx, jobs, nodes, running)`` of 0.1 as 0.2's ``place``; a plan written
    as for 0.1 is sent flat (:func:`placed`)."""

    @functools.wraps(method)
    def wrapper(self, ctx, sync, jobs, nodes, running):
        _begin(ctx, sync)
        return _finish(
            sync,
            _guarded(
                lambda: _as_placed(
                    method(
                        self,
                        ctx,
                        _jobs("place.jobs", jobs),
                        _nodes("place.nodes", nodes),
                        _running("place.running", running),
                    )
                )
            ),
        )

    return wrapper


def preempt(method):
    """``preempt(self, ctx, blocked, blocked_scores, nodes, running)`` of 0.1 as 0.2's ``preempt``."""

    @functools.wraps(method)
    def wrapper(self, ctx, sync, blocked, blocked_scores, nodes, running):
        _begin(ctx, sync)
        return _finish(
            sync,
            _guarded(
                lambda: method(
                    self,
                    ctx,
                    _jobs("preempt.blocked", blocked),
                    blocked_scores,
                    _nodes("preempt.nodes", nodes),
                    _running("preempt.running", running),
                )
            ),
        )

    return wrapper
