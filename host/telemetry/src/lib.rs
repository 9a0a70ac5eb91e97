//! `gantry-telemetry`: the one crate that knows about OpenTelemetry. It installs the
//! `tracing` subscriber (a log formatter, plus an OTLP exporter when an endpoint is
//! configured) and keeps one trace per job lifecycle.
//!
//! Everything else in the daemon only emits `tracing` spans and events:
//! * span `cycle` (fields `cycle_id`, `snapshot_pending`, `snapshot_running`,
//!   `snapshot_nodes`, `jobs_started`, `jobs_evicted`, `jobs_held`, `faults`);
//! * child span `plugin_call` per stage call (`stage`, `plugin_name`, `plugin_version`,
//!   `plugin_sha256`, `inputs`, `outputs`, `fault_kind`, `fallback`);
//! * event with target `gantry::decision` per decision (`job_id`, `decision`
//!   admit/hold/start/pending/evict/reject, `reason_code`, `reason_message`, `node`, `gpus`);
//! * the controller's `job_event` at each lifecycle step of a job (target `gantry::job`,
//!   `job_id`), which reaches [`record_job_step`] through the sink the daemon installs from
//!   [`on_job_traces_enabled`]'s hook (`host/server/src/job_trace_sink.rs`).
//!
//! Owns: subscriber setup, exporter, job traces. Does not own what is traced, and knows
//! neither the daemon (its controller's trace points) nor the agent, which both call it.
//!
//! Export: spans and events with targets under `gantry` (and the engine's and plugin
//! runtime's) at INFO and above go to the OTLP layer, whatever `RUST_LOG` says (that
//! filters the log only). Events inside a span become span events. The exporter runs on
//! the SDK's batch thread behind a bounded queue: a full queue drops the span and counts
//! it, so a slow or dead collector never slows scheduling ([`dropped_spans`]).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod export;
mod jobs;

use gantry_config::telemetry::TelemetryConfig;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use std::time::Duration;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// How long dropping the guard waits for queued spans to be delivered.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// Keeps the exporter alive; dropping it flushes what is queued (for at most 3 s) and
/// logs how many spans were exported and dropped.
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
    /// What the export pipeline has in hand (lost if shutdown cannot deliver it).
    pipeline: Option<std::sync::Arc<export::Pipeline>>,
    /// gRPC's channel runs here (the daemon's runtime does not exist yet at `init`).
    runtime: Option<tokio::runtime::Runtime>,
}

impl TelemetryGuard {
    /// Whether spans are being exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        let Some(provider) = self.provider.take() else {
            return;
        };
        jobs::disable();
        let result = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        let lost = self.pipeline.take().map_or(0, |p| p.settle());
        if let Err(e) = &result {
            tracing::warn!(target: "gantry::telemetry", "telemetry shutdown: {e}");
        }
        tracing::info!(
            target: "gantry::telemetry",
            exported_spans = exported_spans(),
            dropped_spans = dropped_spans(),
            dropped_queue_full = export::STATS.queue_full(),
            dropped_export_failed = export::STATS.export_failed(),
            dropped_at_shutdown = lost,
            export_failures = export_failures(),
            "telemetry shut down"
        );
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Spans that never reached the collector, since the process started: dropped because
/// the bounded span queue was full (or a job step because the job-trace queue was), in
/// batches the exporter failed to deliver (after its own retries and timeout: collector
/// down, refused, or answering an error), or still queued or being sent when shutdown
/// gave up. For `gantry_telemetry_dropped_spans_total`.
pub fn dropped_spans() -> u64 {
    export::STATS.dropped()
}

/// Spans delivered to the collector since the process started.
pub fn exported_spans() -> u64 {
    export::STATS.exported()
}

/// Failed export calls (each a batch of spans) since the process started.
pub fn export_failures() -> u64 {
    export::STATS.failures()
}

/// Installs the global `tracing` subscriber: human-readable logs (`RUST_LOG`, default
/// info) and, when an OTLP endpoint is configured, trace export.
pub fn init(config: &TelemetryConfig) -> anyhow::Result<TelemetryGuard> {
    let (dispatch, guard) = subscriber(config)?;
    // Global default, and `log` records (sled, wasmtime) as events, as `fmt().init()` did.
    dispatch.try_init()?;
    announce(config, &guard);
    Ok(guard)
}

/// What [`init`] installs, without installing it (for benchmarks and tests that scope
/// a subscriber with `tracing::dispatcher::with_default`). Job traces follow the last
/// subscriber built with an exporter, until its guard drops.
pub fn subscriber(config: &TelemetryConfig) -> anyhow::Result<(tracing::Dispatch, TelemetryGuard)> {
    let log_filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer().with_filter(log_filter);
    let target = export::resolve(config, |k| std::env::var(k).ok());
    let Some(target) = target else {
        let registry = tracing_subscriber::registry().with(fmt);
        return Ok((tracing::Dispatch::new(registry), TelemetryGuard::default()));
    };
    let runtime = match target.protocol {
        export::Protocol::Grpc => Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("gantry-otlp")
                .enable_all()
                .build()?,
        ),
        export::Protocol::HttpProtobuf => None,
    };
    let exporter = export::exporter(&target, runtime.as_ref())?;
    let queue = env_number("OTEL_BSP_MAX_QUEUE_SIZE").unwrap_or(export::DEFAULT_QUEUE as u64);
    let queue = usize::try_from(queue.max(1)).unwrap_or(export::DEFAULT_QUEUE);
    let mut batch = BatchConfigBuilder::default().with_max_queue_size(queue);
    if env_number("OTEL_BSP_SCHEDULE_DELAY").is_none() {
        batch = batch.with_scheduled_delay(export::DEFAULT_DELAY);
    }
    let pipeline = std::sync::Arc::new(export::Pipeline::default());
    let processor =
        BatchSpanProcessor::builder(export::CountingExporter::new(exporter, pipeline.clone()))
            .with_batch_config(batch.build())
            .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("gantry")
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_span_processor(export::CountingProcessor::new(
            processor,
            queue,
            pipeline.clone(),
        ))
        .build();
    let tracer = provider.tracer("gantry");
    jobs::enable(tracer.clone());
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(export_filter());
    let registry = tracing_subscriber::registry().with(fmt).with(otel);
    let guard = TelemetryGuard {
        provider: Some(provider),
        pipeline: Some(pipeline),
        runtime,
    };
    Ok((tracing::Dispatch::new(registry), guard))
}

/// What goes to the OTLP layer: the daemon's own spans and events, not its libraries'
/// (HTTP clients inside the exporter must not feed the exporter), nor telemetry's own
/// warnings.
fn export_filter() -> Targets {
    Targets::new()
        .with_target("gantry", LevelFilter::INFO)
        .with_target("gantry_engine", LevelFilter::INFO)
        .with_target("gantry_plugin_runtime", LevelFilter::INFO)
        .with_target("gantry::telemetry", LevelFilter::OFF)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

fn announce(config: &TelemetryConfig, guard: &TelemetryGuard) {
    let target = export::resolve(config, |k| std::env::var(k).ok());
    if let Some(w) = target.as_ref().and_then(|t| t.warning.as_ref()) {
        tracing::warn!(target: "gantry::telemetry", "{w}");
    }
    match target {
        Some(t) if guard.exporting() => tracing::info!(
            target: "gantry::telemetry",
            endpoint = %t.shown,
            protocol = t.protocol.as_str(),
            "exporting traces over OTLP (service.name=gantry)"
        ),
        _ => tracing::debug!(
            target: "gantry::telemetry",
            "no OTLP endpoint configured: traces are not exported"
        ),
    }
}

/// One step of job `job_id` (decided in `cycle`, 0 when not by a cycle), made a span when
/// job traces are exported, else nothing; called on the thread that decided it (so the step
/// links to the current span). The daemon's sink of the controller's job steps
/// (`host/server/src/job_trace_sink.rs`) calls it; the step's log event is the controller's.
///
/// When exporting, the step is a short span named after it (attributes `job_id`, `step`,
/// `cycle`, `detail`) in the job's own trace, under a root span `job {id}` opened at the
/// job's first step and ended at its terminal one (`finished`, `succeeded`, `failed`,
/// `cancelled`, `timed_out`, `preempted`, `rejected`); the step span links to the current
/// span (the `cycle`) when there is one.
pub fn record_job_step(job_id: u64, step: &str, cycle: u64, detail: &str) {
    if jobs::enabled() {
        jobs::record(job_id, step, cycle, detail);
    }
}

/// Registers `hook`, called each time job traces start being kept (an exporter is set up),
/// before the first step is recorded: the daemon installs its sink of the controller's job
/// steps there, so that steps reach [`record_job_step`] only in a process that exports
/// traces. A second registration keeps the first (false).
pub fn on_job_traces_enabled(hook: fn()) -> bool {
    jobs::ON_ENABLE.set(hook).is_ok()
}

/// The trace id (32 hex digits) of job `job_id`'s newest root span `job {id}` made by
/// this process, for the API (`GET /v1/jobs/{id}/trace`); `None` when not exporting, or
/// before the job's first step reached the trace keeper.
pub fn job_trace_id(job_id: u64) -> Option<String> {
    jobs::trace_id(job_id)
}

/// Whether job traces are being made (an OTLP endpoint is configured).
pub fn job_traces_enabled() -> bool {
    jobs::enabled()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use std::sync::{Arc, Mutex};
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    /// Keeps what it is given.
    #[derive(Debug, Clone, Default)]
    struct Memory(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Memory {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(batch);
            Ok(())
        }
    }

    /// What the daemon's sink does with a controller's step (its log event left out).
    fn job_event(job_id: u64, step: &str, cycle: u64, detail: &str) {
        record_job_step(job_id, step, cycle, detail);
    }

    /// Job traces are process-wide: one test at a time touches them.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A job's steps share one trace under a `job N` root, link to the cycle span they
    /// happen in, and the root ends at the terminal step.
    #[test]
    fn job_lifecycle_is_one_trace_linked_to_cycles() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let exporter = Memory::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let tracer = provider.tracer("test");
        jobs::enable(tracer.clone());
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
        let cycle_trace = tracing::subscriber::with_default(subscriber, || {
            job_event(7, "submitted", 0, "by alice");
            let cycle = tracing::info_span!("cycle", cycle_id = 3u64);
            let _e = cycle.enter();
            job_event(7, "started", 3, "node n0 GPUs 0");
            job_event(7, "finished", 0, "exit 0");
            cycle.context().span().span_context().clone()
        });
        assert_eq!(jobs::flush(), 0, "the terminal step closes the trace");
        jobs::disable();
        let spans = exporter.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let job: Vec<_> = spans
            .iter()
            .filter(|s| {
                s.attributes
                    .iter()
                    .any(|kv| kv.key.as_str() == "job_id" && kv.value.as_str() == "7")
            })
            .collect();
        let names: Vec<&str> = job.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(
            names,
            ["submitted", "started", "finished", "job 7"],
            "{names:?}"
        );
        let root = job[3];
        assert_eq!(root.parent_span_id, opentelemetry::trace::SpanId::INVALID);
        for step in &job[..3] {
            assert_eq!(step.span_context.trace_id(), root.span_context.trace_id());
            assert_eq!(step.parent_span_id, root.span_context.span_id());
        }
        assert_ne!(root.span_context.trace_id(), cycle_trace.trace_id());
        // The API names the job's trace (kept after its root ended).
        assert_eq!(
            job_trace_id(7),
            Some(root.span_context.trace_id().to_string())
        );
        let started = job[1];
        assert_eq!(started.links.links.len(), 1);
        assert_eq!(started.links.links[0].span_context, cycle_trace);
        assert!(job[0].links.links.is_empty(), "no cycle around the submit");
    }

    #[test]
    fn no_exporter_keeps_no_job_state() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        jobs::disable();
        job_event(1, "submitted", 0, "");
        assert!(!jobs::enabled());
        assert_eq!(jobs::flush(), 0);
    }
}
