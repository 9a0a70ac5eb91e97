"""Template priority plugin: smallest GPU request first.

Copy this directory, rename the plugin in ``metadata``, change ``score``. Build with
(from the repository root):

    target/toolchains/py/bin/componentize-py -d wit -w priority-plugin componentize \\
        --stub-wasi -p sdk/python/lib -p sdk/python/template app \\
        -o target/plugin-examples/python-template.wasm
"""

from wit_world import exports

import gantry
from gantry import Err  # raise Err("...") to fail a call with a message


class Plugin(exports.Plugin):
    def metadata(self):
        return gantry.metadata(
            "python-template", "0.1.0", ["priority"], "{} (no options): smallest GPU request first"
        )

    def configure(self, config):
        gantry.parse_config(config, {})  # rejects any key: this plugin has no options


class Priority(exports.Priority):
    def score(self, ctx, jobs, previous):
        # Higher runs first: a job asking for fewer GPUs gets a higher score. Ties keep
        # the host's order (tier, then submit time, then id).
        return [gantry.scored(-gantry.gpu_milli(jobs, job)) for job in jobs.jobs]
