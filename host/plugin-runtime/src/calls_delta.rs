//! Calling a 0.2.0 or 0.3.0 plugin (`wit/0.2.0/README.md`; 0.3.0 adds only `gpu.parent`):
//! each stage call starts a sync point, sends its lists as deltas against what the plugin
//! has (`mirror.rs`), and marks the plugin's view current only when the call succeeded (a
//! fault resets it: `instance.rs`). The two versions' calls are one text, expanded per
//! version's bindings by [`delta_calls!`] into [`v02`] and [`v03`].
//!
//! Owns: the 0.2 and 0.3 calls. Does not own the view (`mirror.rs`) or the instance's
//! deadline, memory cap and faults (`instance.rs`).

use crate::instance::PluginInstance;
use gantry_engine::{FaultKind, PolicyFault};

/// A flat answer lifted back (`gantry_contract::wit_convert`, `answers: flat`): an index or
/// range outside its list is refused like any invalid answer, and a full resend follows.
fn flat_answer<T>(p: &mut PluginInstance, lifted: Result<T, String>) -> Result<T, PolicyFault> {
    lifted.map_err(|e| {
        p.mirror.reset();
        PolicyFault::new(FaultKind::InvalidOutput, e)
    })
}

/// The five stage calls of one incremental version: `$b` its bindings module, `$v` its
/// variant of `Guests`.
macro_rules! delta_calls {
    ($b:ident, $v:ident) => {
        use super::flat_answer;
        use crate::instance::{Guests, PluginInstance};
        use crate::mirror::{SyncPoint, jobs, nodes, running};
        use crate::$b::wit;
        use gantry_contract::delta::Mirrored;
        use gantry_contract::wit_convert::vec_into;
        use gantry_contract::{
            Cycle, Eviction, Job, Node, Plan, RunningJob, Scored, Stage, SubmitVerdict, Verdict,
        };
        use gantry_engine::PolicyFault;

        /// Starts a call: its sync point and context in this version's types.
        fn begin(
            p: &mut PluginInstance,
            ctx: &Cycle,
        ) -> (
            SyncPoint,
            wit::SyncPoint,
            wit::Cycle,
            Vec<gantry_contract::Symbol>,
        ) {
            let (sync, c, tr) = p.mirror.begin(ctx);
            let s = wit::SyncPoint {
                generation: sync.generation,
                base: sync.base,
            };
            (sync, s, wit::Cycle::from(&c), tr)
        }

        pub(crate) fn check_submit(
            p: &mut PluginInstance,
            ctx: &Cycle,
            job: &Job,
        ) -> Result<SubmitVerdict, PolicyFault> {
            let (sync, s, c, tr) = begin(p, ctx);
            let j = wit::JobList::from_iter([&job.renumbered(&tr)]);
            let r = p.call(Stage::Admission, |l| match &l.guests {
                Guests::$v(g) => g
                    .admission
                    .as_ref()
                    .map(|g| g.call_check_submit(&mut l.store, &c, s, &j)),
                _ => None,
            })?;
            p.mirror.succeeded(&sync);
            Ok(r.into())
        }

        pub(crate) fn admit(
            p: &mut PluginInstance,
            ctx: &Cycle,
            now: &[Job],
        ) -> Result<Vec<Verdict>, PolicyFault> {
            let (sync, s, c, tr) = begin(p, ctx);
            let m = &mut p.mirror;
            let (keep, fresh) = jobs(&mut m.stats, &mut m.admit_jobs, now, &tr)?;
            let j = wit::JobDelta { keep, fresh };
            let r = p.call(Stage::Admission, |l| match &l.guests {
                Guests::$v(g) => g
                    .admission
                    .as_ref()
                    .map(|g| g.call_admit(&mut l.store, &c, s, &j)),
                _ => None,
            })?;
            p.mirror.succeeded(&sync);
            Ok(vec_into(r))
        }

        pub(crate) fn score(
            p: &mut PluginInstance,
            ctx: &Cycle,
            now: &[Job],
            previous: &[f64],
        ) -> Result<Vec<Scored>, PolicyFault> {
            let (sync, s, c, tr) = begin(p, ctx);
            let m = &mut p.mirror;
            let (keep, fresh) = jobs(&mut m.stats, &mut m.score_jobs, now, &tr)?;
            let j = wit::JobDelta { keep, fresh };
            let r = p.call(Stage::Priority, |l| match &l.guests {
                Guests::$v(g) => g
                    .priority
                    .as_ref()
                    .map(|g| g.call_score(&mut l.store, &c, s, &j, previous)),
                _ => None,
            })?;
            let scored = flat_answer(p, Vec::<Scored>::try_from(r))?;
            p.mirror.succeeded(&sync);
            Ok(scored)
        }

        pub(crate) fn place(
            p: &mut PluginInstance,
            ctx: &Cycle,
            now: &[Job],
            nodes_now: &[Node],
            running_now: &[RunningJob],
        ) -> Result<Plan, PolicyFault> {
            let (sync, s, c, tr) = begin(p, ctx);
            let m = &mut p.mirror;
            let (keep, fresh) = jobs(&mut m.stats, &mut m.place_jobs, now, &tr)?;
            let j = wit::JobDelta { keep, fresh };
            let (keep, fresh) = nodes(&mut m.stats, &mut m.place_nodes, nodes_now, &tr)?;
            let n = wit::NodeDelta { keep, fresh };
            let (keep, fresh) = running(&mut m.stats, &mut m.place_running, running_now, &tr)?;
            let r = wit::RunningDelta { keep, fresh };
            let plan = p.call(Stage::Placement, |l| match &l.guests {
                Guests::$v(g) => g
                    .placement
                    .as_ref()
                    .map(|g| g.call_place(&mut l.store, &c, s, &j, &n, &r)),
                _ => None,
            })?;
            let plan = flat_answer(p, Plan::try_from(plan))?;
            p.mirror.succeeded(&sync);
            Ok(plan)
        }

        pub(crate) fn preempt(
            p: &mut PluginInstance,
            ctx: &Cycle,
            blocked: &[Job],
            blocked_scores: &[f64],
            nodes_now: &[Node],
            running_now: &[RunningJob],
        ) -> Result<Vec<Eviction>, PolicyFault> {
            let (sync, s, c, tr) = begin(p, ctx);
            let m = &mut p.mirror;
            let (keep, fresh) = jobs(&mut m.stats, &mut m.preempt_blocked, blocked, &tr)?;
            let b = wit::JobDelta { keep, fresh };
            let (keep, fresh) = nodes(&mut m.stats, &mut m.preempt_nodes, nodes_now, &tr)?;
            let n = wit::NodeDelta { keep, fresh };
            let (keep, fresh) = running(&mut m.stats, &mut m.preempt_running, running_now, &tr)?;
            let r = wit::RunningDelta { keep, fresh };
            let evictions = p.call(Stage::Preemption, |l| match &l.guests {
                Guests::$v(g) => g
                    .preemption
                    .as_ref()
                    .map(|g| g.call_preempt(&mut l.store, &c, s, &b, blocked_scores, &n, &r)),
                _ => None,
            })?;
            p.mirror.succeeded(&sync);
            Ok(vec_into(evictions))
        }
    };
}

/// Calls into a 0.2.0 plugin.
pub(crate) mod v02 {
    delta_calls!(bindings_v02, V02);
}

/// Calls into a 0.3.0 plugin.
pub(crate) mod v03 {
    delta_calls!(bindings_v03, V03);
}
