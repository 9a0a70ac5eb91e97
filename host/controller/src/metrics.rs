//! Prometheus metrics, typed (`prometheus-client`): every metric is a field of [`Metrics`],
//! registered once under its name and help text, so call sites never name a metric with a
//! string, and a metric recorded is a metric rendered. Counters and histograms are recorded
//! as things happen; gauges (jobs per state and queue, GPUs per node and model) are set from
//! the scheduler's state at scrape, then rendered in the OpenMetrics text format on
//! `GET /metrics`.
//!
//! Owns: the metrics, their names, labels and buckets, and the text format. Does not own
//! what is measured (callers).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Upper bounds of histogram buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A plugin and one of its stages.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginStage {
    /// The plugin's name.
    pub plugin: String,
    /// The stage (`priority`, ...).
    pub stage: String,
}

/// A plugin fault: plugin, stage and kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginFault {
    /// The plugin's name.
    pub plugin: String,
    /// The stage.
    pub stage: String,
    /// The fault's kind (`timeout`, `trap`, ...).
    pub kind: String,
}

/// The result of a node check (`passed` or `failed`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckResult {
    /// `passed` or `failed`.
    pub result: String,
}

/// Jobs of one state in one queue.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateQueue {
    /// `pending` or `running`.
    pub state: String,
    /// The queue.
    pub queue: String,
}

/// GPUs of one model on one node.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeModel {
    /// The node's name.
    pub node: String,
    /// The GPU model.
    pub model: String,
}

/// A gauge family of GPU amounts (fractions count as parts).
pub type GpuGauge = Family<NodeModel, Gauge<f64, AtomicU64>>;

fn duration_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The daemon's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Jobs accepted by the API.
    pub submits: Counter,
    /// Jobs evicted by a preemption policy.
    pub evictions: Counter,
    /// Scheduling cycles run.
    pub cycles: Counter,
    /// Plugin faults by plugin, stage and kind.
    pub plugin_faults: Family<PluginFault, Counter>,
    /// GPUs found unhealthy after start.
    pub gpu_health_failures: Counter,
    /// Node checks of faulty GPUs by result.
    pub gpu_health_checks: Family<CheckResult, Counter>,
    /// Running jobs stopped (to be requeued) because a GPU they held failed.
    pub gpu_fault_stops: Counter,
    /// Trace spans dropped because the exporter's queue was full.
    pub telemetry_dropped_spans: Counter,
    /// Wall time of a scheduling cycle (snapshot to applied).
    pub cycle_duration: Histogram,
    /// Wall time of one start forecast of the pending jobs (`forecasts.rs`).
    pub forecast_seconds: Histogram,
    /// Pending jobs the latest forecast covered.
    pub forecast_jobs: Gauge,
    /// Wall time of one plugin call by plugin and stage.
    pub plugin_call_duration: Family<PluginStage, Histogram, fn() -> Histogram>,
    /// Pending and running jobs by state and queue (set at scrape).
    pub jobs: Family<StateQueue, Gauge>,
    /// GPUs allocated by node and model (set at scrape).
    pub gpus_allocated: GpuGauge,
    /// GPUs by node and model (set at scrape).
    pub gpus: GpuGauge,
    /// Jobs the scheduler holds in memory: active ones and those ended less than
    /// `retention.min_job_age_s` ago (set at scrape).
    pub jobs_in_memory: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Self {
            registry: Registry::default(),
            submits: Counter::default(),
            evictions: Counter::default(),
            cycles: Counter::default(),
            plugin_faults: Family::default(),
            gpu_health_failures: Counter::default(),
            gpu_health_checks: Family::default(),
            gpu_fault_stops: Counter::default(),
            telemetry_dropped_spans: Counter::default(),
            cycle_duration: duration_histogram(),
            forecast_seconds: duration_histogram(),
            forecast_jobs: Gauge::default(),
            plugin_call_duration: Family::new_with_constructor(duration_histogram),
            jobs: Family::default(),
            gpus_allocated: GpuGauge::default(),
            gpus: GpuGauge::default(),
            jobs_in_memory: Gauge::default(),
        };
        // Both results exist from the start (at 0), so a rate over them needs no first failure.
        for result in ["passed", "failed"] {
            drop(m.gpu_health_checks.get_or_create(&CheckResult {
                result: result.into(),
            }));
        }
        let mut registry = Registry::default();
        // Counters are registered without `_total`; the format adds it to their samples.
        registry.register(
            "gantry_submits",
            "Jobs accepted by the API",
            m.submits.clone(),
        );
        registry.register(
            "gantry_evictions",
            "Jobs evicted by a preemption policy",
            m.evictions.clone(),
        );
        registry.register("gantry_cycles", "Scheduling cycles run", m.cycles.clone());
        registry.register(
            "gantry_plugin_faults",
            "Plugin faults by plugin, stage and kind",
            m.plugin_faults.clone(),
        );
        registry.register(
            "gantry_gpu_health_failures",
            "GPUs found unhealthy after start",
            m.gpu_health_failures.clone(),
        );
        registry.register(
            "gantry_gpu_health_checks",
            "Node checks of faulty GPUs by result (passed: back in service)",
            m.gpu_health_checks.clone(),
        );
        registry.register(
            "gantry_gpu_fault_stops",
            "Running jobs stopped to be requeued because a GPU they held failed",
            m.gpu_fault_stops.clone(),
        );
        registry.register(
            "gantry_telemetry_dropped_spans",
            "Trace spans dropped because the exporter's queue was full",
            m.telemetry_dropped_spans.clone(),
        );
        registry.register(
            "gantry_cycle_duration_seconds",
            "Wall time of a scheduling cycle (snapshot to applied)",
            m.cycle_duration.clone(),
        );
        registry.register(
            "gantry_forecast_duration_seconds",
            "Wall time of one start forecast of the pending jobs",
            m.forecast_seconds.clone(),
        );
        registry.register(
            "gantry_forecast_jobs",
            "Pending jobs the latest start forecast covered",
            m.forecast_jobs.clone(),
        );
        registry.register(
            "gantry_plugin_call_duration_seconds",
            "Wall time of one plugin call by plugin and stage",
            m.plugin_call_duration.clone(),
        );
        registry.register(
            "gantry_jobs",
            "Pending and running jobs by state and queue",
            m.jobs.clone(),
        );
        registry.register(
            "gantry_gpus_allocated",
            "GPUs allocated (fractions count as parts) by node and model",
            m.gpus_allocated.clone(),
        );
        registry.register("gantry_gpus", "GPUs by node and model", m.gpus.clone());
        registry.register(
            "gantry_jobs_in_memory",
            "Jobs held in memory: active, and ended less than retention.min_job_age_s ago",
            m.jobs_in_memory.clone(),
        );
        Self { registry, ..m }
    }
}

impl gantry_policy::metrics::PluginMetrics for Metrics {
    /// Records a plugin call's wall time.
    fn plugin_call(&self, plugin: &str, stage: &str, took: Duration) {
        let labels = PluginStage {
            plugin: plugin.to_string(),
            stage: stage.to_string(),
        };
        self.plugin_call_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }
}

impl Metrics {
    /// Counts one node check of a faulty GPU.
    pub fn count_gpu_check(&self, passed: bool) {
        let result = if passed { "passed" } else { "failed" };
        self.gpu_health_checks
            .get_or_create(&CheckResult {
                result: result.into(),
            })
            .inc();
    }

    /// Raises a counter kept elsewhere as a monotonic `total` to that total.
    pub fn catch_up(counter: &Counter, total: u64) {
        counter.inc_by(total.saturating_sub(counter.get()));
    }

    /// Every metric in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "cannot render the metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_policy::metrics::PluginMetrics;

    #[test]
    fn renders_counters_histograms_and_gauges() {
        let m = Metrics::default();
        m.submits.inc_by(2);
        m.plugin_call("fifo", "priority", Duration::from_millis(3));
        m.jobs
            .get_or_create(&StateQueue {
                state: "pending".into(),
                queue: "default".into(),
            })
            .set(5);
        let text = m.render();
        assert!(text.contains("gantry_submits_total 2"), "{text}");
        // prometheus-client writes `le` first; label order carries no meaning.
        assert!(text.contains(r#"gantry_plugin_call_duration_seconds_bucket{le="0.005",plugin="fifo",stage="priority"} 1"#), "{text}");
        assert!(text.contains(r#"gantry_plugin_call_duration_seconds_bucket{le="0.0025",plugin="fifo",stage="priority"} 0"#), "{text}");
        assert!(
            text.contains("# HELP gantry_submits Jobs accepted by the API.\n"),
            "{text}"
        );
        assert!(
            text.contains("gantry_gpu_health_failures_total 0"),
            "{text}"
        );
        assert!(
            text.contains(r#"gantry_jobs{state="pending",queue="default"} 5"#),
            "{text}"
        );
    }
}
