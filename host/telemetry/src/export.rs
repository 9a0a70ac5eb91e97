//! The OTLP side: where to send spans (config, then the standard `OTEL_*` variables),
//! the exporter (HTTP/protobuf or gRPC), and the accounting of what never reaches the
//! collector.
//!
//! Spans travel: `Span::end` → [`CountingProcessor`] (our bound) → the SDK's
//! `BatchSpanProcessor` (its own thread, a channel of the same size) →
//! [`CountingExporter`] → the OTLP exporter. Nothing on the way blocks the caller: a
//! full queue drops the span and counts it.

use gantry_config::telemetry::TelemetryConfig;
use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Spans the processor may hold before it drops new ones (`OTEL_BSP_MAX_QUEUE_SIZE`
/// overrides). Larger than the SDK's 2048: a burst of new jobs makes two spans each
/// (root and first step); a few MiB at most.
pub(crate) const DEFAULT_QUEUE: usize = 16_384;
/// How often the batch processor exports (`OTEL_BSP_SCHEDULE_DELAY` overrides; the
/// SDK's default of 5 s makes traces late for no gain here).
pub(crate) const DEFAULT_DELAY: Duration = Duration::from_millis(1000);

/// The wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    HttpProtobuf,
    Grpc,
}

impl Protocol {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "http/protobuf",
            Self::Grpc => "grpc",
        }
    }
}

/// Where and how to export, once something asked for export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) protocol: Protocol,
    /// The exact URL to give the exporter; `None`: the exporter reads
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` itself (and
    /// appends `/v1/traces` to the latter for HTTP, as the spec says).
    pub(crate) endpoint: Option<String>,
    /// What the log line says.
    pub(crate) shown: String,
    /// Headers from the config (the exporter adds `OTEL_EXPORTER_OTLP_HEADERS` itself).
    pub(crate) headers: BTreeMap<String, String>,
    /// A note for the log (an unsupported protocol that was replaced).
    pub(crate) warning: Option<String>,
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Decides whether to export and where. `env` reads an environment variable (a
/// parameter so tests need not touch the process environment).
pub(crate) fn resolve(
    config: &TelemetryConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Option<Target> {
    if non_empty(env("OTEL_SDK_DISABLED")).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    let from_env = non_empty(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .or_else(|| non_empty(env("OTEL_EXPORTER_OTLP_ENDPOINT")));
    let configured = non_empty(Some(config.endpoint.clone()));
    if configured.is_none() && from_env.is_none() {
        return None;
    }
    let asked = non_empty(Some(config.protocol.clone()))
        .or_else(|| non_empty(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")))
        .or_else(|| non_empty(env("OTEL_EXPORTER_OTLP_PROTOCOL")))
        .unwrap_or_else(|| "http/protobuf".into());
    let (protocol, warning) = match asked.as_str() {
        "grpc" => (Protocol::Grpc, None),
        "http/protobuf" => (Protocol::HttpProtobuf, None),
        other => (
            Protocol::HttpProtobuf,
            Some(format!(
                "OTLP protocol {other:?} is not supported; using http/protobuf"
            )),
        ),
    };
    let endpoint = configured.map(|e| match protocol {
        // The config holds a base URL like OTEL_EXPORTER_OTLP_ENDPOINT does.
        Protocol::HttpProtobuf if !e.trim_end_matches('/').ends_with("/v1/traces") => {
            format!("{}/v1/traces", e.trim_end_matches('/'))
        }
        _ => e,
    });
    let shown = endpoint.clone().or(from_env).unwrap_or_default();
    let warning = warning.or_else(|| {
        shown.starts_with("https://").then(|| {
            format!(
                "OTLP endpoint {shown} uses TLS, which this build does not include: exports will fail (send to a local collector over http://)"
            )
        })
    });
    Some(Target {
        protocol,
        endpoint,
        shown,
        headers: config.headers.clone(),
        warning,
    })
}

/// Process-wide export accounting (readable through `telemetry::dropped_spans` and
/// friends).
pub(crate) struct Stats {
    /// Spans dropped because the queue was full.
    queue_full: AtomicU64,
    /// Spans in batches the exporter failed to deliver (after its own retries).
    export_failed: AtomicU64,
    /// Spans still queued when shutdown gave up, or ended after shutdown.
    at_shutdown: AtomicU64,
    /// Spans delivered.
    exported: AtomicU64,
    /// Failed export calls.
    failures: AtomicU64,
    /// Queue-full drops already reported in the log.
    reported_queue_full: AtomicU64,
    /// When the last export failure was logged.
    last_failure_log: Mutex<Option<Instant>>,
}

pub(crate) static STATS: Stats = Stats {
    queue_full: AtomicU64::new(0),
    export_failed: AtomicU64::new(0),
    at_shutdown: AtomicU64::new(0),
    exported: AtomicU64::new(0),
    failures: AtomicU64::new(0),
    reported_queue_full: AtomicU64::new(0),
    last_failure_log: Mutex::new(None),
};

impl Stats {
    pub(crate) fn dropped(&self) -> u64 {
        self.queue_full.load(Ordering::Relaxed)
            + self.export_failed.load(Ordering::Relaxed)
            + self.at_shutdown.load(Ordering::Relaxed)
    }

    pub(crate) fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    pub(crate) fn queue_full(&self) -> u64 {
        self.queue_full.load(Ordering::Relaxed)
    }

    /// Counts spans dropped before they reached the queue (job steps whose own queue
    /// was full).
    pub(crate) fn count_queue_full(&self, n: u64) {
        self.queue_full.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn export_failed(&self) -> u64 {
        self.export_failed.load(Ordering::Relaxed)
    }

    /// Logs queue-full drops since the last report (from the export thread, never from
    /// the thread that ends a span, which may be inside the subscriber).
    fn report_queue_full(&self) {
        let now = self.queue_full.load(Ordering::Relaxed);
        let before = self.reported_queue_full.swap(now, Ordering::Relaxed);
        if now > before {
            tracing::warn!(
                target: "gantry::telemetry",
                dropped = now - before,
                total_dropped = self.dropped(),
                "span queue full: spans dropped (the OTLP collector is slow or unreachable)"
            );
        }
    }

    fn report_failure(&self, spans: u64, error: &dyn std::fmt::Display) {
        let mut last = self
            .last_failure_log
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(30)) {
            return;
        }
        *last = Some(Instant::now());
        tracing::warn!(
            target: "gantry::telemetry",
            spans,
            total_dropped = self.dropped(),
            "OTLP export failed, spans dropped (further failures logged at most every 30 s): {error}"
        );
    }
}

/// What one exporting pipeline (processor + exporter) has in hand.
#[derive(Debug, Default)]
pub(crate) struct Pipeline {
    /// Spans ended but not yet handed to the exporter.
    in_flight: AtomicU64,
    /// Spans in the export call under way.
    exporting: AtomicU64,
    /// Set once shutdown counted what was in hand as lost: later outcomes of this
    /// pipeline (an export that was still retrying) are not counted again.
    settled: AtomicBool,
}

impl Pipeline {
    /// After the provider shut down (or gave up waiting): whatever is still queued, or in
    /// an export call that has not returned (a collector that does not answer), is lost.
    pub(crate) fn settle(&self) -> u64 {
        self.settled.store(true, Ordering::Release);
        let lost =
            self.in_flight.swap(0, Ordering::AcqRel) + self.exporting.swap(0, Ordering::AcqRel);
        STATS.at_shutdown.fetch_add(lost, Ordering::Relaxed);
        lost
    }
}

/// Subtracts without going below zero.
fn take(counter: &AtomicU64, n: u64) {
    let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        Some(cur.saturating_sub(n))
    });
}

/// Bounds the spans waiting for export at `capacity`: past it, `on_end` drops the span
/// and counts it instead of queueing. The SDK's batch processor behind has a channel of
/// the same capacity, so it never drops on its own (its count is not readable).
#[derive(Debug)]
pub(crate) struct CountingProcessor<P> {
    inner: P,
    capacity: u64,
    pipeline: Arc<Pipeline>,
}

impl<P> CountingProcessor<P> {
    pub(crate) fn new(inner: P, capacity: usize, pipeline: Arc<Pipeline>) -> Self {
        Self {
            inner,
            capacity: capacity as u64,
            pipeline,
        }
    }
}

impl<P: SpanProcessor> SpanProcessor for CountingProcessor<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let p = &self.pipeline;
        if p.settled.load(Ordering::Acquire) {
            STATS.at_shutdown.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let before = p.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= self.capacity {
            take(&p.in_flight, 1);
            STATS.queue_full.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Counts what the exporter delivers and what it fails to.
#[derive(Debug)]
pub(crate) struct CountingExporter<E> {
    inner: E,
    pipeline: Arc<Pipeline>,
}

impl<E> CountingExporter<E> {
    pub(crate) fn new(inner: E, pipeline: Arc<Pipeline>) -> Self {
        Self { inner, pipeline }
    }
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let p = &self.pipeline;
        p.exporting.fetch_add(n, Ordering::AcqRel);
        take(&p.in_flight, n);
        STATS.report_queue_full();
        let result = self.inner.export(batch).await;
        take(&p.exporting, n);
        if p.settled.load(Ordering::Acquire) {
            // Shutdown already counted these spans as lost.
            return result;
        }
        match &result {
            Ok(()) => {
                STATS.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                STATS.export_failed.fetch_add(n, Ordering::Relaxed);
                STATS.failures.fetch_add(1, Ordering::Relaxed);
                STATS.report_failure(n, e);
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Builds the OTLP exporter for `target`. gRPC needs a Tokio runtime for its channel:
/// `runtime` is the one it is built in (telemetry's own, so export never competes with
/// the scheduler's runtime).
pub(crate) fn exporter(
    target: &Target,
    runtime: Option<&tokio::runtime::Runtime>,
) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
    match target.protocol {
        Protocol::HttpProtobuf => {
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_headers(target.headers.clone().into_iter().collect());
            if let Some(e) = &target.endpoint {
                b = b.with_endpoint(e.clone());
            }
            Ok(b.build()?)
        }
        Protocol::Grpc => {
            let _entered = runtime.map(tokio::runtime::Runtime::enter);
            let mut headers = http::HeaderMap::new();
            for (k, v) in &target.headers {
                let name = http::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| anyhow::anyhow!("telemetry header {k:?}: {e}"))?;
                let value = http::HeaderValue::from_str(v)
                    .map_err(|e| anyhow::anyhow!("telemetry header {k:?}: {e}"))?;
                headers.insert(name, value);
            }
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_protocol(opentelemetry_otlp::Protocol::Grpc)
                .with_metadata(
                    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers),
                );
            if let Some(e) = &target.endpoint {
                b = b.with_endpoint(e.clone());
            }
            Ok(b.build()?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str, protocol: &str) -> TelemetryConfig {
        TelemetryConfig {
            endpoint: endpoint.into(),
            protocol: protocol.into(),
            headers: BTreeMap::from([("x-key".to_string(), "v".to_string())]),
        }
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    /// Keeps nothing and exports nothing: every span it is given stays "in flight".
    #[derive(Debug)]
    struct Stuck;

    impl SpanProcessor for Stuck {
        fn on_start(&self, _span: &mut Span, _cx: &Context) {}
        fn on_end(&self, _span: SpanData) {}
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// Fails every export.
    #[derive(Debug)]
    struct Refused;

    impl SpanExporter for Refused {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(
                "connection refused".into(),
            ))
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_and_failed_exports_count() {
        use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
        let pipeline = Arc::new(Pipeline::default());
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_span_processor(CountingProcessor::new(Stuck, 2, pipeline.clone()))
            .build();
        let tracer = provider.tracer("t");
        let before = STATS.queue_full();
        for _ in 0..5 {
            tracer.start("s").end();
        }
        assert_eq!(STATS.queue_full() - before, 3, "capacity 2, 5 spans");
        let before = STATS.dropped();
        assert_eq!(pipeline.settle(), 2, "the two queued are lost at shutdown");
        tracer.start("late").end();
        assert_eq!(STATS.dropped() - before, 3);

        let pipeline = Arc::new(Pipeline::default());
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(CountingExporter::new(Refused, pipeline))
            .build();
        let before = (STATS.export_failed(), STATS.failures());
        provider.tracer("t").start("s").end();
        assert_eq!(
            (
                STATS.export_failed() - before.0,
                STATS.failures() - before.1
            ),
            (1, 1)
        );
    }

    #[test]
    fn nothing_configured_exports_nothing() {
        assert_eq!(resolve(&config("", ""), env(&[])), None);
        assert_eq!(
            resolve(
                &config("", ""),
                env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])
            ),
            None
        );
    }

    #[test]
    fn config_endpoint_is_a_base_url_for_http() {
        let t = resolve(&config("http://127.0.0.1:4318", ""), env(&[])).expect("target");
        assert_eq!(t.protocol, Protocol::HttpProtobuf);
        assert_eq!(
            t.endpoint.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(t.headers.get("x-key").map(String::as_str), Some("v"));
        let t = resolve(&config("http://c:4318/v1/traces/", ""), env(&[])).expect("target");
        assert_eq!(t.endpoint.as_deref(), Some("http://c:4318/v1/traces/"));
    }

    #[test]
    fn grpc_endpoint_is_used_as_is() {
        let t = resolve(&config("http://127.0.0.1:4317", "grpc"), env(&[])).expect("target");
        assert_eq!(t.protocol, Protocol::Grpc);
        assert_eq!(t.endpoint.as_deref(), Some("http://127.0.0.1:4317"));
    }

    #[test]
    fn environment_is_used_when_config_is_empty() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        let t = resolve(&config("", ""), env(&vars)).expect("target");
        assert_eq!(t.protocol, Protocol::Grpc);
        assert_eq!(
            t.endpoint, None,
            "the exporter resolves env endpoints itself"
        );
        assert_eq!(t.shown, "http://collector:4317");
        let vars = [
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://c:4318/v1/traces",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ];
        let t = resolve(&config("", ""), env(&vars)).expect("target");
        assert_eq!(t.protocol, Protocol::HttpProtobuf);
        // The config's protocol wins over the environment's.
        let t = resolve(&config("", "grpc"), env(&vars)).expect("target");
        assert_eq!(t.protocol, Protocol::Grpc);
    }

    #[test]
    fn sdk_disabled_and_unknown_protocols() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert_eq!(resolve(&config("http://c:4318", ""), env(&vars)), None);
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ];
        let t = resolve(&config("", ""), env(&vars)).expect("target");
        assert_eq!(t.protocol, Protocol::HttpProtobuf);
        assert!(t.warning.is_some());
    }
}
