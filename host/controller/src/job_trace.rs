//! The controller's trace points in a job's life: one call per step (`submitted`,
//! `admitted`, `held`, `started`, `evicted`, `requeued`, `finished`), always a log event
//! (`tracing`, target `gantry::job`), and handed to the sink the server installs, which makes
//! it a span of the job's own trace when traces are exported (`crate::job_trace_sink`, which
//! hands it to `gantry_telemetry`).
//!
//! The controller knows nothing of OpenTelemetry: it calls [`job_event`]; the sink is set
//! once per process ([`set_sink`]), as `tracing`'s own subscriber is. Without a sink (a
//! test, a benchmark) a step is only logged.
//!
//! Owns: the trace points' names and arguments, and the sink's seam. Does not own traces,
//! their export or their accounting (`gantry-telemetry`).

use std::sync::OnceLock;

/// Where job steps go beyond the log: the server's trace keeper.
pub trait JobTraceSink: Send + Sync {
    /// One step of job `job_id`, decided in `cycle` (0 when not by a cycle), called on the
    /// thread that decided it (so the step can link to the current span).
    fn step(&self, job_id: u64, step: &str, cycle: u64, detail: &str);
    /// Spans that never reached the collector since the process started.
    fn dropped_spans(&self) -> u64;
}

static SINK: OnceLock<&'static dyn JobTraceSink> = OnceLock::new();

/// Installs the process's sink; a second call keeps the first (false).
pub fn set_sink(sink: &'static dyn JobTraceSink) -> bool {
    SINK.set(sink).is_ok()
}

/// One step in a job's life: a log event, and a step of its trace through the sink.
pub(crate) fn job_event(job_id: u64, step: &str, cycle: u64, detail: &str) {
    tracing::info!(target: "gantry::job", job_id = job_id, step = %step, cycle = cycle, detail = %detail, "job lifecycle");
    if let Some(sink) = SINK.get() {
        sink.step(job_id, step, cycle, detail);
    }
}

/// Spans the sink could not deliver (0 without one), for `gantry_telemetry_dropped_spans_total`.
pub(crate) fn dropped_spans() -> u64 {
    SINK.get().map_or(0, |sink| sink.dropped_spans())
}
