//! Calling a 0.2.0 plugin (`wit/0.2.0/README.md`): each stage call starts a sync point,
//! sends its lists as deltas against what the plugin has (`mirror.rs`), and marks the
//! plugin's view current only when the call succeeded (a fault resets it: `instance.rs`).
//!
//! Owns: the 0.2 calls. Does not own the view (`mirror.rs`) or the instance's deadline,
//! memory cap and faults (`instance.rs`).

use crate::bindings_v02::wit;
use crate::instance::{Guests, PluginInstance};
use crate::mirror::{jobs, nodes, running};
use gantry_contract::delta::Mirrored;
use gantry_contract::wit_convert::vec_into;
use gantry_contract::{
    Cycle, Eviction, Job, Node, Plan, RunningJob, Scored, Stage, SubmitVerdict, Verdict,
};
use gantry_engine::{FaultKind, PolicyFault};

pub(crate) fn check_submit(
    p: &mut PluginInstance,
    ctx: &Cycle,
    job: &Job,
) -> Result<SubmitVerdict, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let j = wit::JobList::from_iter([&job.renumbered(&tr)]);
    let r = p.call(Stage::Admission, |l| match &l.guests {
        Guests::V02(g) => g
            .admission
            .as_ref()
            .map(|g| g.call_check_submit(&mut l.store, &c, sync, &j)),
        Guests::V01(_) => None,
    })?;
    p.mirror.succeeded(&sync);
    Ok(r.into())
}

pub(crate) fn admit(
    p: &mut PluginInstance,
    ctx: &Cycle,
    now: &[Job],
) -> Result<Vec<Verdict>, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let j = jobs(&mut m.stats, &mut m.admit_jobs, now, &tr)?;
    let r = p.call(Stage::Admission, |l| match &l.guests {
        Guests::V02(g) => g
            .admission
            .as_ref()
            .map(|g| g.call_admit(&mut l.store, &c, sync, &j)),
        Guests::V01(_) => None,
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
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let j = jobs(&mut m.stats, &mut m.score_jobs, now, &tr)?;
    let r = p.call(Stage::Priority, |l| match &l.guests {
        Guests::V02(g) => g
            .priority
            .as_ref()
            .map(|g| g.call_score(&mut l.store, &c, sync, &j, previous)),
        Guests::V01(_) => None,
    })?;
    let scored = flat_answer(p, Vec::<Scored>::try_from(r))?;
    p.mirror.succeeded(&sync);
    Ok(scored)
}

/// A flat answer lifted back (`gantry_contract::wit_convert`, `answers: flat`): an index or
/// range outside its list is refused like any invalid answer, and a full resend follows.
fn flat_answer<T>(p: &mut PluginInstance, lifted: Result<T, String>) -> Result<T, PolicyFault> {
    lifted.map_err(|e| {
        p.mirror.reset();
        PolicyFault::new(FaultKind::InvalidOutput, e)
    })
}

pub(crate) fn place(
    p: &mut PluginInstance,
    ctx: &Cycle,
    now: &[Job],
    nodes_now: &[Node],
    running_now: &[RunningJob],
) -> Result<Plan, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let j = jobs(&mut m.stats, &mut m.place_jobs, now, &tr)?;
    let n = nodes(&mut m.stats, &mut m.place_nodes, nodes_now, &tr)?;
    let r = running(&mut m.stats, &mut m.place_running, running_now, &tr)?;
    let plan = p.call(Stage::Placement, |l| match &l.guests {
        Guests::V02(g) => g
            .placement
            .as_ref()
            .map(|g| g.call_place(&mut l.store, &c, sync, &j, &n, &r)),
        Guests::V01(_) => None,
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
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let b = jobs(&mut m.stats, &mut m.preempt_blocked, blocked, &tr)?;
    let n = nodes(&mut m.stats, &mut m.preempt_nodes, nodes_now, &tr)?;
    let r = running(&mut m.stats, &mut m.preempt_running, running_now, &tr)?;
    let evictions = p.call(Stage::Preemption, |l| match &l.guests {
        Guests::V02(g) => g
            .preemption
            .as_ref()
            .map(|g| g.call_preempt(&mut l.store, &c, sync, &b, blocked_scores, &n, &r)),
        Guests::V01(_) => None,
    })?;
    p.mirror.succeeded(&sync);
    Ok(vec_into(evictions))
}
