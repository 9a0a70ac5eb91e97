//! Where an instrumented plugin call reports its wall time: [`PluginMetrics`], implemented by
//! the daemon's Prometheus `Metrics` (`gantry_plugin_call_duration_seconds`, labels
//! `plugin` and `stage`), and [`NoMetrics`] for runs whose metrics nobody reads (the
//! conformance runner, the simulator).
//!
//! Owns: the trait. Does not own metric names, labels or their rendering (the daemon's
//! `metrics.rs`).

use std::time::Duration;

/// Records the calls of plugin instances (`instrumented::Instrumented`).
pub trait PluginMetrics: std::fmt::Debug + Send + Sync {
    /// Records a plugin call's wall time: `plugin` is its name, `stage` the stage's name
    /// (`priority`, ...).
    fn plugin_call(&self, plugin: &str, stage: &str, took: Duration);
}

/// Metrics that record nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMetrics;

impl PluginMetrics for NoMetrics {
    fn plugin_call(&self, _plugin: &str, _stage: &str, _took: Duration) {}
}
