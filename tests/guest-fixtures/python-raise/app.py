"""Test fixture: a priority plugin whose `score` always fails.

Config `{}` (default, or `{"mode": "raise"}`): `score` raises an uncaught RuntimeError,
which componentize-py turns into a trap (fault kind `trap`; the instance is re-made).
Config `{"mode": "err"}`: `score` raises `Err(...)`, i.e. returns the WIT result error
(fault kind `plugin-error` carrying the message).
"""

from wit_world import exports

import gantry
from gantry import Err

mode = "raise"


class Plugin(exports.Plugin):
    def metadata(self):
        return gantry.metadata(
            "python-raise", "0.1.0", ["priority"], '{"mode": "raise" | "err"} (test fixture: score always fails)'
        )

    def configure(self, config):
        global mode
        c = gantry.parse_config(config, {"mode": "raise"})
        if c["mode"] not in ("raise", "err"):
            raise gantry.invalid_config("mode", 'must be "raise" or "err", got %r' % c["mode"])
        mode = c["mode"]


class Priority(exports.Priority):
    def score(self, ctx, jobs, previous):
        if mode == "err":
            raise Err("python-raise: returning an error")
        raise RuntimeError("python-raise: refusing to score %d jobs" % len(jobs.jobs))
