//! A plugin instance wrapped so that every stage call's wall time is recorded, for
//! the conformance report.

use gantry_contract::{
    Cycle, Eviction, Job, Node, Plan, RunningJob, Scored, SubmitVerdict, Verdict,
};
use gantry_engine::{
    AdmissionStage, PlacementStage, PluginIdent, PolicyFault, PreemptionStage, PriorityStage,
};
use gantry_plugin_runtime::PluginInstance;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Call durations, shared with the runner.
pub type Timings = Arc<Mutex<Vec<Duration>>>;

/// A plugin instance that records how long each call takes.
pub struct Timed {
    inner: PluginInstance,
    timings: Timings,
}

impl Timed {
    /// Wraps `inner`, recording into `timings`.
    pub fn new(inner: PluginInstance, timings: Timings) -> Self {
        Self { inner, timings }
    }

    fn time<T>(&mut self, f: impl FnOnce(&mut PluginInstance) -> T) -> T {
        let t = Instant::now();
        let r = f(&mut self.inner);
        if let Ok(mut v) = self.timings.lock() {
            v.push(t.elapsed());
        }
        r
    }
}

impl AdmissionStage for Timed {
    fn ident(&self) -> &PluginIdent {
        self.inner.plugin_ident()
    }
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, PolicyFault> {
        self.time(|p| p.check_submit(ctx, job))
    }
    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
        self.time(|p| p.admit(ctx, jobs))
    }
}

impl PriorityStage for Timed {
    fn ident(&self) -> &PluginIdent {
        self.inner.plugin_ident()
    }
    fn score(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        self.time(|p| p.score(ctx, jobs, previous))
    }
}

impl PlacementStage for Timed {
    fn ident(&self) -> &PluginIdent {
        self.inner.plugin_ident()
    }
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, PolicyFault> {
        self.time(|p| p.place(ctx, jobs, nodes, running))
    }
}

impl PreemptionStage for Timed {
    fn ident(&self) -> &PluginIdent {
        self.inner.plugin_ident()
    }
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, PolicyFault> {
        self.time(|p| p.preempt(ctx, blocked, blocked_scores, nodes, running))
    }
}
