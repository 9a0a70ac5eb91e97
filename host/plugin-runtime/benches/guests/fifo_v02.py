# Benchmark guest: `fifo` in Python on contract 0.2 (the SDK's gantry_incremental keeps
# the view; the method is the 0.1 one), for the per-language call-cost benchmark.
import wit_world
from wit_world.exports import plugin

import gantry
import gantry_incremental as incremental


class Plugin(wit_world.exports.Plugin):
    def metadata(self) -> plugin.PluginInfo:
        return plugin.PluginInfo("py-fifo", "0.1.0", "0.2.0", [plugin.Stage.PRIORITY], "")

    def configure(self, config: str) -> None:
        pass


class Priority(wit_world.exports.Priority):
    @incremental.score
    def score(self, ctx, jobs, previous):
        return [gantry.scored(-float(j.submit_ms)) for j in jobs.jobs]
