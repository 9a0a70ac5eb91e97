//! Prometheus metrics, rendered in the text exposition format on `GET /metrics`.
//! Counters and histograms are recorded as things happen; gauges (jobs per state and
//! queue, GPUs per node and model) are computed from the scheduler's state at scrape.
//!
//! Owns: the registry and the text format. Does not own what is measured (callers).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of histogram buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Label set, rendered as `{k="v",...}`.
pub type Labels = Vec<(&'static str, String)>;

/// A gauge family computed at scrape time: name, help, samples.
pub type Gauge = (&'static str, &'static str, Vec<(Labels, f64)>);

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Debug, Default)]
struct Inner {
    counters: BTreeMap<(&'static str, String), f64>,
    histograms: BTreeMap<(&'static str, String), Histogram>,
}

/// The daemon's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

fn render_labels(labels: &[(&'static str, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}=\"{}\"",
                v.replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n")
            )
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// Help text and type of every metric, in output order.
const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "gantry_submits_total",
        "counter",
        "Jobs accepted by the API.",
    ),
    (
        "gantry_evictions_total",
        "counter",
        "Jobs evicted by a preemption policy.",
    ),
    ("gantry_cycles_total", "counter", "Scheduling cycles run."),
    (
        "gantry_plugin_faults_total",
        "counter",
        "Plugin faults by plugin, stage and kind.",
    ),
    (
        "gantry_cycle_duration_seconds",
        "histogram",
        "Wall time of a scheduling cycle (snapshot to applied).",
    ),
    (
        "gantry_plugin_call_duration_seconds",
        "histogram",
        "Wall time of one plugin call by plugin and stage.",
    ),
];

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `v` to a counter.
    pub fn add(&self, name: &'static str, labels: Labels, v: f64) {
        *self
            .lock()
            .counters
            .entry((name, render_labels(&labels)))
            .or_default() += v;
    }

    /// Sets a counter kept elsewhere (a monotonic total read at scrape).
    pub fn set_counter(&self, name: &'static str, v: f64) {
        self.lock().counters.insert((name, String::new()), v);
    }

    /// Records a duration in a histogram.
    pub fn observe(&self, name: &'static str, labels: Labels, d: Duration) {
        self.lock()
            .histograms
            .entry((name, render_labels(&labels)))
            .or_default()
            .observe(d.as_secs_f64());
    }

    /// Renders the recorded families followed by `gauges` (name, help, samples).
    pub fn render(&self, gauges: &[Gauge]) -> String {
        let inner = self.lock();
        let mut out = String::new();
        for (name, kind, help) in FAMILIES {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            if *kind == "counter" {
                for ((n, labels), v) in inner.counters.iter().filter(|((n, _), _)| n == name) {
                    let _ = writeln!(out, "{n}{labels} {v}");
                }
                continue;
            }
            for ((n, labels), h) in inner.histograms.iter().filter(|((n, _), _)| n == name) {
                let inner_labels = labels.trim_start_matches('{').trim_end_matches('}');
                let sep = if inner_labels.is_empty() { "" } else { "," };
                for (i, b) in BUCKETS.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "{n}_bucket{{{inner_labels}{sep}le=\"{b}\"}} {}",
                        h.counts[i]
                    );
                }
                let _ = writeln!(
                    out,
                    "{n}_bucket{{{inner_labels}{sep}le=\"+Inf\"}} {}",
                    h.count
                );
                let _ = writeln!(out, "{n}_sum{labels} {}", h.sum);
                let _ = writeln!(out, "{n}_count{labels} {}", h.count);
            }
        }
        for (name, help, samples) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (labels, v) in samples {
                let _ = writeln!(out, "{name}{} {v}", render_labels(labels));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histograms_and_gauges() {
        let m = Metrics::default();
        m.add("gantry_submits_total", vec![], 2.0);
        m.observe(
            "gantry_plugin_call_duration_seconds",
            vec![("plugin", "fifo".into()), ("stage", "priority".into())],
            Duration::from_millis(3),
        );
        let text = m.render(&[(
            "gantry_jobs",
            "Jobs.",
            vec![(vec![("state", "pending".into())], 5.0)],
        )]);
        assert!(text.contains("gantry_submits_total 2"), "{text}");
        assert!(text.contains(r#"gantry_plugin_call_duration_seconds_bucket{plugin="fifo",stage="priority",le="0.005"} 1"#), "{text}");
        assert!(text.contains(r#"gantry_plugin_call_duration_seconds_bucket{plugin="fifo",stage="priority",le="0.0025"} 0"#), "{text}");
        assert!(text.contains(r#"gantry_jobs{state="pending"} 5"#), "{text}");
    }
}
