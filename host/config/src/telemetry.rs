//! The `[telemetry]` section of the configuration: where traces are exported over OTLP.
//!
//! Owns these settings. Exporting is the daemon's (`telemetry/export.rs` in `gantry-server`).

use serde::{Deserialize, Serialize};

/// OpenTelemetry (OTLP) export of traces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// OTLP endpoint, e.g. `http://127.0.0.1:4318` (HTTP) or `http://127.0.0.1:4317`
    /// (gRPC). Empty: `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
    /// and if those are unset too, nothing is exported.
    pub endpoint: String,
    /// "http/protobuf" (default) or "grpc"; `OTEL_EXPORTER_OTLP_PROTOCOL` when empty.
    pub protocol: String,
    /// Extra headers, e.g. an API key; `OTEL_EXPORTER_OTLP_HEADERS` adds to these.
    pub headers: std::collections::BTreeMap<String, String>,
}
