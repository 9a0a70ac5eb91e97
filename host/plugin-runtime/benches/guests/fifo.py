# Benchmark guest: the same logic as the Rust `fifo` plugin (earlier submit scores
# higher), in Python, for the per-language call-cost benchmark.
import wit_world
from wit_world.exports import plugin, priority


class Plugin(wit_world.exports.Plugin):
    def metadata(self) -> plugin.PluginInfo:
        return plugin.PluginInfo("py-fifo", "0.1.0", "0.1.0", [plugin.Stage.PRIORITY], "")

    def configure(self, config: str) -> None:
        pass


class Priority(wit_world.exports.Priority):
    def score(self, ctx, jobs, previous):
        return [priority.Scored(-float(j.submit_ms), None, None) for j in jobs.jobs]
