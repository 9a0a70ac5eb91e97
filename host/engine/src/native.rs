//! Runs a plugin crate in-process: a plugin implements the contract traits
//! (`gantry_contract::{Admission, Priority, ...}`) failing with a `String`; [`Native`]
//! implements the same traits failing with a [`PolicyFault`], plus [`Identified`], which
//! makes it an engine stage. Used for tests, the simulator's native mode, and
//! wasm-versus-native benchmarks.

use crate::pipeline::{FaultKind, Identified, PluginIdent, PolicyFault};
use gantry_contract::{
    Admission, Cycle, Eviction, Job, Node, Placement, Plan, Plugin, Preemption, Priority,
    RunningJob, Scored, SubmitVerdict, Verdict,
};

/// A plugin compiled into the host.
#[derive(Debug)]
pub struct Native<P> {
    ident: PluginIdent,
    plugin: P,
}

impl<P: Plugin> Native<P> {
    /// Configures `plugin` with `config_json` and wraps it.
    pub fn new(mut plugin: P, config_json: &str) -> Result<Self, PolicyFault> {
        plugin.configure(config_json).map_err(err)?;
        let m = plugin.metadata();
        Ok(Self {
            ident: PluginIdent {
                name: m.name,
                version: m.version,
                sha256: "native".into(),
            },
            plugin,
        })
    }
}

fn err(message: String) -> PolicyFault {
    PolicyFault::new(FaultKind::PluginError, message)
}

impl<P> Identified for Native<P> {
    fn ident(&self) -> &PluginIdent {
        &self.ident
    }
}

impl<P: Admission> Admission<PolicyFault> for Native<P> {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, PolicyFault> {
        self.plugin.check_submit(ctx, job).map_err(err)
    }
    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
        self.plugin.admit(ctx, jobs).map_err(err)
    }
}

impl<P: Priority> Priority<PolicyFault> for Native<P> {
    fn score(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        self.plugin.score(ctx, jobs, previous).map_err(err)
    }
}

impl<P: Placement> Placement<PolicyFault> for Native<P> {
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, PolicyFault> {
        self.plugin.place(ctx, jobs, nodes, running).map_err(err)
    }
}

impl<P: Preemption> Preemption<PolicyFault> for Native<P> {
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, PolicyFault> {
        self.plugin
            .preempt(ctx, blocked, blocked_scores, nodes, running)
            .map_err(err)
    }
}
