"""python-interns: an organisation's admission policy for interns, in Python.

Config (JSON, every key optional, unknown keys rejected):

    {"interns": ["bob", "carol"], "max_gpus": 2, "queue": "dev", "max_interactive_s": 14400}

At submit (check-submit):
  * an intern's job in a queue other than `queue` is rejected;
  * an intern's job that alone needs more than `max_gpus` GPUs is rejected (it could
    never be admitted);
  * anyone's interactive job with a time limit above `max_interactive_s`, or with no
    limit (time-limit-s 0), is rejected.
Each cycle (admit): an intern holds at most `max_gpus` GPUs at once, counting what their
running jobs hold now (ctx.user_gpus) plus their jobs admitted earlier in the same list;
the rest are held with `held-by-policy`. Everyone else is admitted.
"""

from wit_world import exports
from wit_world.imports import types

import gantry
from gantry import Err

DEFAULTS = {
    "interns": ["bob", "carol"],
    "max_gpus": 2,
    "queue": "dev",
    "max_interactive_s": 14400,
}

HINT = (
    '{"interns": ["bob", "carol"], "max_gpus": 2, "queue": "dev", "max_interactive_s": 14400} '
    "(all optional, these are the defaults): interns only in `queue`, at most `max_gpus` "
    "GPUs per intern at once; interactive jobs of anyone at most `max_interactive_s` seconds"
)

config = dict(DEFAULTS)


class Plugin(exports.Plugin):
    def metadata(self):
        return gantry.metadata("python-interns", "0.1.0", ["admission"], HINT)

    def configure(self, text):
        global config
        c = gantry.parse_config(text, DEFAULTS)
        if c["max_gpus"] < 0:
            raise gantry.invalid_config("max_gpus", "must be >= 0, got %d" % c["max_gpus"])
        if c["max_interactive_s"] <= 0:
            raise gantry.invalid_config(
                "max_interactive_s", "must be > 0, got %d" % c["max_interactive_s"]
            )
        if not c["queue"]:
            raise gantry.invalid_config("queue", "must not be empty")
        c["interns"] = set(c["interns"])
        config = c


class Admission(exports.Admission):
    def check_submit(self, ctx, jobs):
        if len(jobs.jobs) != 1:
            raise Err("check-submit: expected exactly one job, got %d" % len(jobs.jobs))
        job = jobs.jobs[0]
        user = gantry.text(ctx, job.user)
        if user in config["interns"]:
            queue = gantry.text(ctx, job.queue)
            if queue != config["queue"]:
                return gantry.reject(
                    "interns may only use queue %s; job asked for queue %s" % (config["queue"], queue)
                )
            need, cap = gantry.gpu_milli(jobs, job), config["max_gpus"] * 1000
            if need > cap:
                return gantry.reject(
                    "interns may hold at most %s GPUs at once; this job needs %s"
                    % (gantry.fmt_gpus(cap), gantry.fmt_gpus(need))
                )
        limit, most = job.time_limit_s, config["max_interactive_s"]
        if job.kind == types.JobKind.INTERACTIVE and (limit == 0 or limit > most):
            asked = "no limit" if limit == 0 else gantry.fmt_duration(limit)
            return gantry.reject(
                "interactive jobs may run at most %s (asked %s); use a batch job for longer work"
                % (gantry.fmt_duration(most), asked)
            )
        return gantry.accept()

    def admit(self, ctx, jobs):
        interns, cap = config["interns"], config["max_gpus"] * 1000
        # milli-GPU each user's running jobs hold now (one pass, not one per job)
        holding = {gantry.text(ctx, use.who): use.gpu_milli for use in ctx.user_gpus}
        admitted = {}  # intern name -> milli-GPU admitted earlier in this list
        verdicts = []
        for job in jobs.jobs:
            user = gantry.text(ctx, job.user)
            if user not in interns:
                verdicts.append(gantry.admit())
                continue
            need = gantry.gpu_milli(jobs, job)
            running = holding.get(user, 0)
            earlier = admitted.get(user, 0)
            if need > 0 and running + earlier + need > cap:
                held = "%s of %s GPUs" % (gantry.fmt_gpus(running + earlier), gantry.fmt_gpus(cap))
                if earlier:
                    held += " (%s running, %s admitted this cycle)" % (
                        gantry.fmt_gpus(running),
                        gantry.fmt_gpus(earlier),
                    )
                verdicts.append(
                    gantry.hold(
                        "held-by-policy",
                        "intern %s holds %s; this job needs %s more"
                        % (user, held, gantry.fmt_gpus(need)),
                    )
                )
            else:
                admitted[user] = earlier + need
                verdicts.append(gantry.admit())
        return verdicts
