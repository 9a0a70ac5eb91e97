//! A plugin instance as the live daemon runs it: every stage call is a `plugin_call`
//! tracing span (plugin name, version, sha256, stage, inputs, outputs, fault kind)
//! and a sample of `gantry_plugin_call_duration_seconds` (reported to a
//! [`PluginMetrics`]: the daemon's `Metrics`). It implements the contract's
//! stage traits with `E = PolicyFault` (the engine's stage traits, with [`Identified`]).
//!
//! Owns: per-call observation. Does not own the call (the plugin runtime) or fallback
//! (the engine).

use crate::metrics::PluginMetrics;
use gantry_contract::{
    Admission, Cycle, Eviction, Job, Node, Placement, Plan, Preemption, Priority, RunningJob,
    Scored, Stage, SubmitVerdict, Verdict,
};
use gantry_engine::{Identified, PluginIdent, PolicyFault};
use gantry_plugin_runtime::PluginInstance;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Call durations collected for a report (the conformance runner's).
pub type Timings = Arc<Mutex<Vec<Duration>>>;

/// A plugin instance with tracing and metrics around each call.
pub struct Instrumented {
    inner: PluginInstance,
    metrics: Arc<dyn PluginMetrics>,
    timings: Option<Timings>,
}

impl Instrumented {
    /// Wraps `inner`.
    pub fn new(inner: PluginInstance, metrics: Arc<dyn PluginMetrics>) -> Self {
        Self {
            inner,
            metrics,
            timings: None,
        }
    }

    /// Also appends every call's duration to `timings`.
    pub fn with_timings(mut self, timings: Timings) -> Self {
        self.timings = Some(timings);
        self
    }

    fn observe<T>(
        &mut self,
        stage: Stage,
        inputs: usize,
        outputs: impl Fn(&T) -> usize,
        call: impl FnOnce(&mut PluginInstance) -> Result<T, PolicyFault>,
    ) -> Result<T, PolicyFault> {
        let id = self.inner.plugin_ident().clone();
        let span = tracing::info_span!(
            "plugin_call",
            stage = stage.as_str(),
            plugin_name = %id.name,
            plugin_version = %id.version,
            plugin_sha256 = %id.sha256,
            inputs,
            outputs = tracing::field::Empty,
            fault_kind = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let _enter = span.enter();
        let t = Instant::now();
        let r = call(&mut self.inner);
        let elapsed = t.elapsed();
        self.metrics.plugin_call(&id.name, stage.as_str(), elapsed);
        if let Some(mut v) = self.timings.as_ref().and_then(|t| t.lock().ok()) {
            v.push(elapsed);
        }
        span.record("duration_ms", elapsed.as_secs_f64() * 1000.0);
        match &r {
            Ok(v) => {
                span.record("outputs", outputs(v));
            }
            Err(f) => {
                span.record("fault_kind", f.kind.as_str());
            }
        }
        r
    }
}

impl Identified for Instrumented {
    fn ident(&self) -> &PluginIdent {
        self.inner.plugin_ident()
    }

    fn answer_rejected(&mut self) {
        self.inner.answer_rejected();
    }
}

impl Admission<PolicyFault> for Instrumented {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, PolicyFault> {
        self.observe(Stage::Admission, 1, |_| 1, |p| p.check_submit(ctx, job))
    }
    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
        self.observe(Stage::Admission, jobs.len(), Vec::len, |p| {
            p.admit(ctx, jobs)
        })
    }
}

impl Priority<PolicyFault> for Instrumented {
    fn score(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        self.observe(Stage::Priority, jobs.len(), Vec::len, |p| {
            p.score(ctx, jobs, previous)
        })
    }
}

impl Placement<PolicyFault> for Instrumented {
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, PolicyFault> {
        self.observe(
            Stage::Placement,
            jobs.len(),
            |p: &Plan| p.starts.len(),
            |p| p.place(ctx, jobs, nodes, running),
        )
    }
}

impl Preemption<PolicyFault> for Instrumented {
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, PolicyFault> {
        self.observe(Stage::Preemption, blocked.len(), Vec::len, |p| {
            p.preempt(ctx, blocked, blocked_scores, nodes, running)
        })
    }
}
