"""Helpers for writing Gantry policy plugins in Python (contract gantry:policy@0.1.0; for
0.2.0, whose calls carry only what changed, decorate the stage methods with
``gantry_incremental``'s decorators and everything here works the same).

A plugin is a module ``app.py`` built with componentize-py; it defines one class per
exported interface (``Plugin`` and the stages of its world, e.g. ``Priority``) that
subclass the generated ``wit_world.exports`` protocols. This module saves the
boilerplate those classes share:

* per-call data is flat: ``tasks(jobs, job)`` and ``labels(jobs, job, ctx)`` resolve a
  job's ranges in its ``job-list``; ``text(ctx, symbol)`` resolves an interned string;
* ``gpu_milli(jobs, job)`` and ``gpus_held(ctx, user)`` do the GPU arithmetic;
* ``metadata(...)``, ``admit()``, ``hold(...)``, ``accept()``, ``reject(...)``,
  ``scored(...)`` build the contract's records and variants;
* ``parse_config(config, fields)`` parses the JSON ``configure`` receives and raises
  ``Err("invalid config: ...")`` naming the offending field;
* ``log(level, message)`` writes to the plugin's log on the host (``print`` cannot: the
  component is built with ``--stub-wasi``, and any WASI call traps).

Errors: raise ``Err("message")`` (re-exported here) from a stage or ``configure`` to
return the WIT ``result`` error: the host records a ``plugin-error`` fault with your
message and falls back. Any other exception escaping a stage is a trap (fault kind
``trap``, whose message is wasmtime's backtrace). Importing this module inside a
component installs a ``sys.excepthook`` that first writes the exception's type, text
and innermost line into the plugin's log (``log("error", ...)``), so the daemon's log
says what went wrong; the default hook would trap on WASI before printing anything.

Plain Python 3, no dependencies. The generated ``wit_world`` modules are imported
lazily, so this file also imports outside a component (where ``Err`` falls back to a
stand-in class with the same shape), which lets you unit-test policy logic natively.
"""

import collections
import json
import sys

try:  # inside a component (or with generated bindings on sys.path)
    from componentize_py_types import Err
except ImportError:  # plain Python, e.g. unit tests without bindings

    class Err(Exception):
        """Stand-in for ``componentize_py_types.Err`` outside a component."""

        def __init__(self, value):
            super().__init__(value)
            self.value = value


__all__ = [
    "CONTRACT",
    "Err",
    "text",
    "symbol",
    "tasks",
    "labels",
    "gpu_milli",
    "gpus_held",
    "metadata",
    "admit",
    "hold",
    "reason",
    "accept",
    "reject",
    "scored",
    "parse_config",
    "invalid_config",
    "fmt_gpus",
    "fmt_duration",
    "log",
]

#: The contract version this SDK speaks; ``metadata()`` puts it into ``plugin-info``.
CONTRACT = "0.1.0"


# --- symbols and ranges -------------------------------------------------------------


def text(ctx, symbol):
    """The string an interned ``symbol`` stands for (``ctx.strings[symbol]``).

    Symbols index ``ctx.strings`` of the same call only: do not keep them across calls.
    """
    return ctx.strings[symbol]


def symbol(ctx, name):
    """The symbol of ``name`` in this call's string table, or ``None`` if absent.

    Linear in the table: when you compare many symbols against one name, look it up
    once and compare integers.
    """
    try:
        return ctx.strings.index(name)
    except ValueError:
        return None


def tasks(job_list, job):
    """The task groups of ``job``: ``job_list.groups[first_group : first_group + group_count]``.

    Each group is ``count`` identical tasks with ``gpus`` (whole GPUs) or ``gpu_milli``
    (a fraction of one GPU), ``cpu_milli``, ``memory_mib`` and ``gpu_model_mask``.
    """
    return job_list.groups[job.first_group : job.first_group + job.group_count]


def labels(job_list, job, ctx):
    """The labels of ``job`` as a ``{key: value}`` dict of strings (resolved through ``ctx``)."""
    s = ctx.strings
    return {
        s[label.key]: s[label.value]
        for label in job_list.labels[job.first_label : job.first_label + job.label_count]
    }


# --- GPU arithmetic -----------------------------------------------------------------


def gpu_milli(job_list, job):
    """Total milli-GPU the whole job asks for (2 tasks x 2 GPUs = 4000; 1 x 250 milli = 250).

    Per group: ``gpus * 1000 * count`` for whole GPUs, else ``gpu_milli * count``.
    """
    total = 0
    for g in tasks(job_list, job):
        total += (g.gpus * 1000 if g.gpus else g.gpu_milli) * g.count
    return total


def gpus_held(ctx, user):
    """Milli-GPU held right now by running jobs of ``user`` (from ``ctx.user_gpus``); 0 if none.

    ``user`` is a user name (``str``) or a symbol of this call (``int``, e.g. ``job.user``).
    The result is in milli-GPU: 2 whole GPUs = 2000.
    """
    if isinstance(user, str):
        s = ctx.strings
        for use in ctx.user_gpus:
            if s[use.who] == user:
                return use.gpu_milli
        return 0
    for use in ctx.user_gpus:
        if use.who == user:
            return use.gpu_milli
    return 0


def fmt_gpus(milli):
    """Milli-GPU as a GPU count for messages: 2000 -> "2", 1500 -> "1.5", 250 -> "0.25"."""
    whole, frac = divmod(int(milli), 1000)
    if frac == 0:
        return str(whole)
    return ("%d.%03d" % (whole, frac)).rstrip("0")


def fmt_duration(seconds):
    """Seconds for messages: 14400 -> "4h", 5400 -> "1h30m", 90 -> "1m30s", 0 -> "0s"."""
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = ""
    if h:
        out += "%dh" % h
    if m:
        out += "%dm" % m
    if s or not out:
        out += "%ds" % s
    return out


# --- records and variants -----------------------------------------------------------


def metadata(name, version, stages, hint="", contract=CONTRACT):
    """The ``plugin-info`` record for ``Plugin.metadata``, with ``contract`` = ``CONTRACT``
    (``"0.2.0"`` for a plugin built against ``wit/0.2.0`` with ``gantry_incremental``).

    ``stages`` lists what the plugin implements, as names (``"priority"``, ``"admission"``,
    ``"placement"``, ``"preemption"``) or ``plugin.Stage`` values; it must match the
    stages the component exports, or the host refuses it. ``hint`` describes the JSON
    ``configure`` accepts.
    """
    from wit_world.exports import plugin

    resolved = []
    for st in stages:
        if isinstance(st, str):
            try:
                st = plugin.Stage[st.upper()]
            except KeyError:
                raise ValueError("unknown stage %r" % st) from None
        resolved.append(st)
    return plugin.PluginInfo(
        name=name, version=version, contract=contract, stages=resolved, config_hint=hint
    )


def reason(code, message):
    """A ``reason`` record; ``code`` is a reason-code name (``"held-by-policy"``,
    ``"insufficient-gpus"``, ``"other"``...) or a ``types.ReasonCode`` value."""
    from wit_world.imports import types

    if isinstance(code, str):
        try:
            code = types.ReasonCode[code.upper().replace("-", "_")]
        except KeyError:
            raise ValueError("unknown reason code %r" % code) from None
    return types.Reason(code=code, message=message)


def admit():
    """Admission verdict (per cycle): the job may be considered for placement now."""
    from wit_world.exports import admission

    return admission.Verdict_Admit()


def hold(code, message):
    """Admission verdict (per cycle): the job waits with this reason, e.g.
    ``hold("held-by-policy", "intern bob holds 2 of 2 GPUs")``. Holds are data, not errors."""
    from wit_world.exports import admission

    return admission.Verdict_Hold(reason(code, message))


def accept(queue=None, tier=None, time_limit_s=None, preemptible=None, labels=None):
    """Submit verdict: accept the job, optionally patching the given fields (``labels``
    is a dict or a list of ``(key, value)`` pairs to add or overwrite)."""
    from wit_world.exports import admission

    if queue is None and tier is None and time_limit_s is None and preemptible is None and not labels:
        return admission.SubmitVerdict_Accept()
    pairs = list(labels.items()) if isinstance(labels, dict) else list(labels or [])
    return admission.SubmitVerdict_AcceptWith(
        admission.JobPatch(
            queue=queue,
            tier=tier,
            time_limit_s=time_limit_s,
            preemptible=preemptible,
            labels=pairs,
        )
    )


def reject(message):
    """Submit verdict: refuse the job; the client gets HTTP 422 with ``message``."""
    from wit_world.exports import admission

    return admission.SubmitVerdict_Reject(message)


#: A priority result where the world has no ``scored`` record (contract 0.2, whose
#: ``gantry_incremental.score`` turns a list of them into ``scores``).
_Scored = collections.namedtuple("Scored", ["score", "tier", "note"])


_scored_class = []


def scored(score, tier=None, note=None):
    """One priority result: ``score`` (higher first), optional ``tier`` override and ``note``."""
    if not _scored_class:
        from wit_world.exports import priority

        _scored_class.append(getattr(priority, "Scored", _Scored))
    return _scored_class[0](float(score), tier, note)


# --- configuration ------------------------------------------------------------------


def invalid_config(field, problem):
    """The exception to raise for a bad config value: ``Err("invalid config: FIELD PROBLEM")``."""
    return Err("invalid config: %s %s" % (field, problem))


def _type_name(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _check(field, default, value):
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise invalid_config(field, "must be true or false, got %s" % _type_name(value))
    elif isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid_config(field, "must be an integer, got %s" % _type_name(value))
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid_config(field, "must be a number, got %s" % _type_name(value))
        value = float(value)
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise invalid_config(field, "must be a string, got %s" % _type_name(value))
    elif isinstance(default, list):
        if not isinstance(value, list):
            raise invalid_config(field, "must be a list of strings, got %s" % _type_name(value))
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise invalid_config(
                    "%s[%d]" % (field, i), "must be a string, got %s" % _type_name(item)
                )
    elif isinstance(default, dict):
        if not isinstance(value, dict):
            raise invalid_config(field, "must be an object, got %s" % _type_name(value))
    return value


def parse_config(config, fields):
    """Parses the JSON string ``configure`` receives against ``fields`` (``{name: default}``).

    Returns a dict with every field: the config's value, or the default when absent.
    The default's type is the field's type: ``bool``, ``int`` (JSON ``2.0`` is accepted
    as 2), ``float`` (an int is accepted), ``str``, ``list`` (of strings) or ``dict``; a
    default of ``None`` accepts anything. Raises ``Err("invalid config: ...")`` naming
    the field for malformed JSON, a non-object, an unknown key or a wrong type, e.g.
    ``invalid config: max_gpus must be an integer, got a string``. An empty string
    counts as ``{}``. Check ranges yourself and raise ``invalid_config(field, problem)``.
    """
    config = (config or "").strip() or "{}"
    try:
        raw = json.loads(config)
    except ValueError as e:
        raise Err("invalid config: not JSON (%s)" % e) from None
    if not isinstance(raw, dict):
        raise Err("invalid config: expected a JSON object, got %s" % _type_name(raw))
    for key in raw:
        if key not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise invalid_config(key, "is not a known field (known: %s)" % known)
    out = {}
    for field, default in fields.items():
        if field in raw:
            value = raw[field]
            out[field] = value if default is None else _check(field, default, value)
        else:
            out[field] = list(default) if isinstance(default, list) else default
    return out


# --- logging ------------------------------------------------------------------------


def log(level, message):
    """Writes one line into the plugin's log on the host (rate-limited per call).

    ``level`` is ``"trace"``, ``"debug"``, ``"info"``, ``"warn"`` or ``"error"``. Use this
    instead of ``print``: components are built with ``--stub-wasi`` and cannot write to
    stdout. Outside a component (no bindings) it does nothing.
    """
    try:
        from wit_world.imports import host
    except ImportError:
        return
    try:
        host.log(host.Level[level.upper()], message)
    except NotImplementedError:  # generated bindings outside a component
        pass


def _log_uncaught(kind, value, tb):
    """``sys.excepthook`` inside a component: componentize-py prints an uncaught exception
    (which calls the hook) and then traps. Writes one line through ``host.log`` without
    touching WASI (no ``traceback`` module: it reads source files)."""
    try:
        where = ""
        while tb is not None:
            code, line = tb.tb_frame.f_code, tb.tb_lineno
            where = " (%s:%d in %s)" % (code.co_filename.rsplit("/", 1)[-1], line, code.co_name)
            tb = tb.tb_next
        log("error", "uncaught %s: %s%s" % (getattr(kind, "__name__", kind), value, where))
    except BaseException:  # never raise from the hook
        pass


try:  # only exists inside a component: leave native interpreters' hook alone
    import componentize_py_runtime  # noqa: F401

    sys.excepthook = _log_uncaught
except ImportError:
    pass
