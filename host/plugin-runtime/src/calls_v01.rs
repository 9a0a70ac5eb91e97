//! Calling a 0.1.0 plugin: every list whole in every call (`wit/0.1.0/`), and the stage
//! traits of [`PluginInstance`], which send each call to the plugin's contract version.
//!
//! Owns: the 0.1 calls and the dispatch. Does not own the instance's deadline, memory cap
//! and faults (`instance.rs`) or 0.2's deltas (`calls_v02.rs`).

use crate::bindings::wit;
use crate::calls_v02;
use crate::instance::{Guests, PluginInstance};
use crate::runtime::Indices;
use gantry_contract::wit_convert::vec_into;
use gantry_contract::{
    Admission, Cycle, Eviction, Job, Node, Placement, Plan, Preemption, Priority, RunningJob,
    Scored, Stage, SubmitVerdict, Verdict,
};
use gantry_engine::PolicyFault;

fn is_v02(p: &PluginInstance) -> bool {
    matches!(p.loaded().indices, Indices::V02(_))
}

impl Admission<PolicyFault> for PluginInstance {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, PolicyFault> {
        if is_v02(self) {
            return calls_v02::check_submit(self, ctx, job);
        }
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter([job]));
        self.call(Stage::Admission, |l| match &l.guests {
            Guests::V01(g) => g
                .admission
                .as_ref()
                .map(|g| g.call_check_submit(&mut l.store, &c, &j)),
            Guests::V02(_) => None,
        })
        .map(SubmitVerdict::from)
    }

    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
        if is_v02(self) {
            return calls_v02::admit(self, ctx, jobs);
        }
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter(jobs));
        self.call(Stage::Admission, |l| match &l.guests {
            Guests::V01(g) => g
                .admission
                .as_ref()
                .map(|g| g.call_admit(&mut l.store, &c, &j)),
            Guests::V02(_) => None,
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
        if is_v02(self) {
            return calls_v02::score(self, ctx, jobs, previous);
        }
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter(jobs));
        self.call(Stage::Priority, |l| match &l.guests {
            Guests::V01(g) => g
                .priority
                .as_ref()
                .map(|g| g.call_score(&mut l.store, &c, &j, previous)),
            Guests::V02(_) => None,
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
        if is_v02(self) {
            return calls_v02::place(self, ctx, jobs, nodes, running);
        }
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
            Guests::V02(_) => None,
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
        if is_v02(self) {
            return calls_v02::preempt(self, ctx, blocked, blocked_scores, nodes, running);
        }
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
            Guests::V02(_) => None,
        })
        .map(vec_into)
    }
}
