//! The conformance runner's checks of an incremental (0.2 or later) plugin's mirror: on
//! each built-in scenario and each stage it implements, one instance is called on the
//! scenario, then on a changed copy (a delta: a job gone, a node's GPUs taken, every
//! symbol re-numbered), then, after the host forgets what it sent (as after a trap), on the
//! scenario again (a full resend). Each answer must equal a fresh instance's on the same
//! input. A plugin that applies a delta wrongly, or keeps its old lists or string table
//! across a full resend, fails here.
//!
//! Owns: those checks. Does not own the pipelines they run in (`mod.rs`).

use super::scenarios::Scenario;
use super::{Defaults, Options, Report, faults_text, pipeline};
use gantry_contract::{Stage, Symbol};
use gantry_engine::{CycleOutcome, Pipeline, Snapshot, run_cycle};
use gantry_plugin_runtime::LoadedPlugin;
use std::sync::{Arc, Mutex};

/// `s` changed as between two cycles: its first pending job gone, the first node's GPUs
/// all taken, its strings in another order (every symbol re-numbered).
fn changed(s: &Snapshot) -> Snapshot {
    let mut next = s.clone();
    next.ctx.id += 1;
    if !next.pending.is_empty() {
        next.pending.remove(0);
    }
    if let Some(n) = next.nodes.first_mut() {
        for g in &mut n.gpus {
            g.free_milli = 0;
        }
    }
    let n = next.ctx.strings.len();
    if n > 1 {
        // Symbol i becomes n - 1 - i.
        next.ctx.strings.reverse();
        let flip = |s: &mut Symbol| *s = (n as Symbol - 1).saturating_sub(*s);
        let job = |j: &mut gantry_contract::Job| {
            for s in [&mut j.name, &mut j.user, &mut j.account, &mut j.queue] {
                flip(s);
            }
            for l in &mut j.labels {
                flip(&mut l.key);
                flip(&mut l.value);
            }
        };
        next.pending.iter_mut().for_each(job);
        next.running.iter_mut().for_each(|r| job(&mut r.job));
        for node in &mut next.nodes {
            flip(&mut node.name);
            node.gpus.iter_mut().for_each(|g| flip(&mut g.model));
            for l in &mut node.labels {
                flip(&mut l.key);
                flip(&mut l.value);
            }
        }
        next.ctx.gpu_models.iter_mut().for_each(flip);
        for u in next
            .ctx
            .user_usage
            .iter_mut()
            .chain(&mut next.ctx.account_usage)
        {
            flip(&mut u.who);
        }
        for u in next
            .ctx
            .user_gpus
            .iter_mut()
            .chain(&mut next.ctx.account_gpus)
        {
            flip(&mut u.who);
        }
        next.ctx.queues.iter_mut().for_each(|q| flip(&mut q.queue));
    }
    next
}

/// What must agree: order, starts with allocations, evictions, reasons.
fn decisions(out: &CycleOutcome) -> String {
    let starts: Vec<_> = out.starts.iter().map(|s| (s.job, &s.tasks)).collect();
    let evictions: Vec<_> = out.evictions.iter().map(|e| (e.job, e.for_job)).collect();
    let pending: Vec<_> = out
        .pending
        .iter()
        .map(|(id, r)| (id, r.code, &r.message))
        .collect();
    format!(
        "order {:?} starts {starts:?} evictions {evictions:?} pending {pending:?}",
        out.order
    )
}

/// The plugin under test in `pipe` at `stage`: the host forgets what it sent it.
fn forget(pipe: &mut Pipeline, stage: Stage) {
    match stage {
        Stage::Admission => pipe
            .admission
            .iter_mut()
            .for_each(|s| s.plugin.answer_rejected()),
        Stage::Priority => pipe
            .priority
            .iter_mut()
            .for_each(|s| s.plugin.answer_rejected()),
        Stage::Placement => pipe.placement.plugin.answer_rejected(),
        Stage::Preemption => pipe
            .preemption
            .iter_mut()
            .for_each(|s| s.plugin.answer_rejected()),
    }
}

/// The three checks of one stage on one scenario (an incremental plugin only).
pub(super) fn check(
    plugin: &LoadedPlugin,
    stage: Stage,
    s: &Scenario,
    opts: &Options,
    d: &Defaults,
    report: &mut Report,
) {
    let timings = Arc::new(Mutex::new(Vec::new()));
    let fresh_answer = |snap: &Snapshot| -> anyhow::Result<CycleOutcome> {
        let mut p = pipeline(plugin, &[stage], opts, d, &timings)?;
        Ok(run_cycle(snap, &mut p, None))
    };
    let next = changed(&s.snapshot);
    let outcome = (|| -> anyhow::Result<Vec<(&str, CycleOutcome, CycleOutcome)>> {
        let mut kept = pipeline(plugin, &[stage], opts, d, &timings)?;
        run_cycle(&s.snapshot, &mut kept, None);
        let delta = run_cycle(&next, &mut kept, None);
        forget(&mut kept, stage);
        let resent = run_cycle(&s.snapshot, &mut kept, None);
        Ok(vec![
            ("a delta", delta, fresh_answer(&next)?),
            (
                "a full resend after a fault",
                resent,
                fresh_answer(&s.snapshot)?,
            ),
        ])
    })();
    let cases = match outcome {
        Ok(c) => c,
        Err(e) => {
            return report.add(
                false,
                format!("{stage} on {} (incremental)", s.name),
                e.to_string(),
            );
        }
    };
    for (what, got, want) in cases {
        let name = format!("{stage} on {} after {what} (incremental)", s.name);
        let faults = faults_text(&got);
        if !faults.is_empty() {
            report.add(false, name, faults);
        } else if decisions(&got) != decisions(&want) {
            report.add(
                false,
                name,
                format!(
                    "differs from a fresh instance's answer: {} / fresh: {}",
                    decisions(&got),
                    decisions(&want)
                ),
            );
        } else {
            report.add(true, name, "the same as a fresh instance's answer");
        }
    }
}
