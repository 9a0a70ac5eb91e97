//! Calling a 0.1.0 plugin: every list whole in every call (`wit/0.1.0/`), and the stage
//! traits of [`PluginInstance`], which send each call to the plugin's contract version.
//!
//! Owns: the 0.1 calls and the dispatch. Does not own the instance's deadline, memory cap
//! and faults (`instance.rs`) or the deltas of 0.2 and 0.3 (`calls_delta.rs`).

use crate::bindings::wit;
use crate::calls_delta::{v02, v03};
use crate::instance::{Guests, PluginInstance};
use crate::runtime::Indices;
use gantry_contract::wit_convert::vec_into;
use gantry_contract::{
    Admission, Cycle, Eviction, Job, Node, Placement, Plan, Preemption, Priority, RunningJob,
    Scored, Stage, SubmitVerdict, Verdict,
};
use gantry_engine::PolicyFault;

/// Sends a call to the plugin's incremental version, if it speaks one: `$f` is the
/// function's name in `calls_delta`'s `v02` and `v03`.
macro_rules! incremental {
    ($p:expr, $f:ident($($arg:expr),*)) => {
        match $p.loaded().indices {
            Indices::V02(_) => return v02::$f($p, $($arg),*),
            Indices::V03(_) => return v03::$f($p, $($arg),*),
            Indices::V01(_) => {}
        }
    };
}

impl Admission<PolicyFault> for PluginInstance {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, PolicyFault> {
        incremental!(self, check_submit(ctx, job));
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter([job]));
        self.call(Stage::Admission, |l| match &l.guests {
            Guests::V01(g) => g
                .admission
                .as_ref()
                .map(|g| g.call_check_submit(&mut l.store, &c, &j)),
            _ => None,
        })
        .map(SubmitVerdict::from)
    }

    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
        incremental!(self, admit(ctx, jobs));
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter(jobs));
        self.call(Stage::Admission, |l| match &l.guests {
            Guests::V01(g) => g
                .admission
                .as_ref()
                .map(|g| g.call_admit(&mut l.store, &c, &j)),
            _ => None,
        })
        .map(vec_into)
    }
}

impl Priority<PolicyFault> for PluginInstance {
    fn score(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        incremental!(self, score(ctx, jobs, previous));
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter(jobs));
        self.call(Stage::Priority, |l| match &l.guests {
            Guests::V01(g) => g
                .priority
                .as_ref()
                .map(|g| g.call_score(&mut l.store, &c, &j, previous)),
            _ => None,
        })
        .map(vec_into)
    }
}

impl Placement<PolicyFault> for PluginInstance {
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, PolicyFault> {
        incremental!(self, place(ctx, jobs, nodes, running));
        let (c, j, n, r) = (
            wit::Cycle::from(ctx),
            wit::JobList::from_iter(jobs),
            wit::NodeList::from(nodes),
            wit::RunningList::from(running),
        );
        self.call(Stage::Placement, |l| match &l.guests {
            Guests::V01(g) => g
                .placement
                .as_ref()
                .map(|g| g.call_place(&mut l.store, &c, &j, &n, &r)),
            _ => None,
        })
        .map(Plan::from)
    }
}

impl Preemption<PolicyFault> for PluginInstance {
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, PolicyFault> {
        incremental!(self, preempt(ctx, blocked, blocked_scores, nodes, running));
        let (c, b, n, r) = (
            wit::Cycle::from(ctx),
            wit::JobList::from_iter(blocked),
            wit::NodeList::from(nodes),
            wit::RunningList::from(running),
        );
        self.call(Stage::Preemption, |l| match &l.guests {
            Guests::V01(g) => g
                .preemption
                .as_ref()
                .map(|g| g.call_preempt(&mut l.store, &c, &b, blocked_scores, &n, &r)),
            _ => None,
        })
        .map(vec_into)
    }
}
