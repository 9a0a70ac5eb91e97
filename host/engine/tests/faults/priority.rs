//! Priority plugins that return the wrong number of scores, NaN, infinity, or fail.

use super::*;

fn live_with_priority(chain: Vec<StageSlot<dyn PriorityStage>>) -> Pipeline {
    Pipeline {
        admission: vec![],
        priority: chain,
        placement: common::first_fit("{}"),
        preemption: None,
    }
}

fn priority_fallback() -> Pipeline {
    live_with_priority(vec![largest_first()])
}

fn short_scores(jobs: &[Job]) -> Result<Vec<Scored>, PolicyFault> {
    Ok(jobs
        .iter()
        .skip(1)
        .map(|_| Scored {
            score: 1.0,
            tier: None,
            note: None,
        })
        .collect())
}

fn nan_scores(jobs: &[Job]) -> Result<Vec<Scored>, PolicyFault> {
    Ok(jobs
        .iter()
        .map(|j| Scored {
            score: if j.id == 3 { f64::NAN } else { 1.0 },
            tier: None,
            note: None,
        })
        .collect())
}

fn infinite_scores(jobs: &[Job]) -> Result<Vec<Scored>, PolicyFault> {
    Ok(jobs
        .iter()
        .map(|_| Scored {
            score: f64::INFINITY,
            tier: None,
            note: None,
        })
        .collect())
}

fn erroring_scores(_: &[Job]) -> Result<Vec<Scored>, PolicyFault> {
    Err(boom())
}

fn run_bad_priority(
    script: fn(&[Job]) -> Result<Vec<Scored>, PolicyFault>,
    kind: FaultKind,
) -> CycleOutcome {
    let snap = cluster();
    let (slot, calls) = priority_slot("bad-priority", script);
    // The bad plugin is second in the chain: the whole chain falls back.
    let mut live = live_with_priority(vec![common::fifo(), slot]);
    let out = run_cycle(&snap, &mut live, Some(&mut priority_fallback()));
    assert_eq!(calls.get(), 1);
    assert_one_fault(&out, Stage::Priority, "bad-priority", kind);
    let want = clean(&snap, priority_fallback);
    assert_fallback_decision(&snap, &out, &want);
    // largest-first: 2 GPUs (1, 2 by submit time), 1 GPU (4), 600 (3), 500 (5).
    assert_eq!(out.order, vec![1, 2, 4, 3, 5]);
    out
}

#[test]
fn priority_with_too_few_scores_falls_back() {
    let out = run_bad_priority(short_scores, FaultKind::InvalidOutput);
    assert!(out.faults[0].fault.message.contains("4 scores for 5 jobs"));
}

#[test]
fn priority_with_a_nan_score_falls_back() {
    run_bad_priority(nan_scores, FaultKind::InvalidOutput);
}

#[test]
fn priority_with_an_infinite_score_falls_back() {
    run_bad_priority(infinite_scores, FaultKind::InvalidOutput);
}

#[test]
fn priority_error_falls_back() {
    run_bad_priority(erroring_scores, FaultKind::PluginError);
}

#[test]
fn priority_fault_without_fallback_scores_zero() {
    let snap = cluster();
    let (slot, _) = priority_slot("bad-priority", nan_scores);
    let mut jobs_reversed = snap.clone();
    // Later submit for lower ids: zero scores order by submit time, then id.
    for j in &mut jobs_reversed.pending {
        j.submit_ms = 10_000 - j.id;
    }
    let out = run_cycle(&jobs_reversed, &mut live_with_priority(vec![slot]), None);
    assert_eq!(out.faults.len(), 1);
    assert_eq!(out.order, vec![5, 4, 3, 2, 1]);
    assert!(common::check_outcome(&jobs_reversed, &out).is_empty());
}

#[test]
fn priority_fault_without_fallback_is_not_marked_fell_back() {
    let snap = cluster();
    let (slot, _) = priority_slot("bad-priority", erroring_scores);
    let out = run_cycle(&snap, &mut live_with_priority(vec![slot]), None);
    assert_eq!(out.faults.len(), 1);
    assert!(!out.faults[0].fell_back);
}

#[test]
fn priority_error_is_quarantined_after_three() {
    let (slot, calls) = priority_slot("bad-priority", erroring_scores);
    assert_quarantined_after_three(
        &cluster(),
        live_with_priority(vec![slot]),
        &calls,
        Stage::Priority,
        "bad-priority",
        FaultKind::PluginError,
    );
}

#[test]
fn priority_wrong_count_is_quarantined_after_three() {
    let (slot, calls) = priority_slot("bad-priority", short_scores);
    assert_quarantined_after_three(
        &cluster(),
        live_with_priority(vec![slot]),
        &calls,
        Stage::Priority,
        "bad-priority",
        FaultKind::InvalidOutput,
    );
}

#[test]
fn priority_nan_is_quarantined_after_three() {
    let (slot, calls) = priority_slot("bad-priority", nan_scores);
    assert_quarantined_after_three(
        &cluster(),
        live_with_priority(vec![slot]),
        &calls,
        Stage::Priority,
        "bad-priority",
        FaultKind::InvalidOutput,
    );
}
