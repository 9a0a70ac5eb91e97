//! Admission plugins that return the wrong number of verdicts or fail.

use super::*;

fn live_with_admission(chain: Vec<StageSlot<dyn AdmissionStage>>) -> Pipeline {
    Pipeline {
        admission: chain,
        priority: vec![common::fifo()],
        placement: common::first_fit("{}"),
        preemption: None,
    }
}

/// The fallback holds job 1 (the first in order), so the rest can start.
fn admission_fallback() -> Pipeline {
    live_with_admission(vec![hold_job("quota", 1)])
}

fn extra_verdict(jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
    Ok(vec![Verdict::Admit; jobs.len() + 1])
}

fn missing_verdict(jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
    Ok(vec![Verdict::Admit; jobs.len() - 1])
}

fn erroring_admission(_: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
    Err(boom())
}

fn run_bad_admission(
    script: fn(&[Job]) -> Result<Vec<Verdict>, PolicyFault>,
    kind: FaultKind,
) -> CycleOutcome {
    let snap = cluster();
    let (slot, calls) = admission_slot("bad-admission", script);
    let mut live = live_with_admission(vec![slot]);
    let out = run_cycle(&snap, &mut live, Some(&mut admission_fallback()));
    assert_eq!(calls.get(), 1);
    assert_one_fault(&out, Stage::Admission, "bad-admission", kind);
    assert_fallback_decision(&snap, &out, &clean(&snap, admission_fallback));
    let (_, hold) = out
        .pending
        .iter()
        .find(|(j, _)| *j == 1)
        .expect("job 1 has a reason");
    assert_eq!(hold.code, ReasonCode::HeldByPolicy);
    assert_eq!(hold.stage, Stage::Admission);
    assert!(!out.order.contains(&1));
    out
}

#[test]
fn admission_with_an_extra_verdict_falls_back() {
    let out = run_bad_admission(extra_verdict, FaultKind::InvalidOutput);
    assert!(
        out.faults[0]
            .fault
            .message
            .contains("6 verdicts for 5 jobs")
    );
}

#[test]
fn admission_with_a_missing_verdict_falls_back() {
    run_bad_admission(missing_verdict, FaultKind::InvalidOutput);
}

#[test]
fn admission_error_falls_back() {
    run_bad_admission(erroring_admission, FaultKind::PluginError);
}

#[test]
fn admission_fallback_hold_is_attributed_to_the_fallback_plugin() {
    let out = run_bad_admission(erroring_admission, FaultKind::PluginError);
    let (_, hold) = out
        .pending
        .iter()
        .find(|(j, _)| *j == 1)
        .expect("job 1 has a reason");
    assert_eq!(hold.plugin, "quota");
}

#[test]
fn admission_fault_without_fallback_admits_everyone() {
    let snap = cluster();
    let (slot, _) = admission_slot("bad-admission", extra_verdict);
    let out = run_cycle(&snap, &mut live_with_admission(vec![slot]), None);
    assert_eq!(out.faults.len(), 1);
    assert_eq!(out.order.len(), snap.pending.len());
    let want = clean(&snap, || native_pipeline("{}", false));
    assert_eq!(starts_of(&out), starts_of(&want));
}

#[test]
fn a_faulty_fallback_admission_is_recorded_too() {
    let snap = cluster();
    let (slot, _) = admission_slot("bad-admission", erroring_admission);
    let (fb_slot, _) = admission_slot("bad-fallback", missing_verdict);
    let out = run_cycle(
        &snap,
        &mut live_with_admission(vec![slot]),
        Some(&mut live_with_admission(vec![fb_slot])),
    );
    assert_eq!(out.faults.len(), 2, "{:#?}", out.faults);
}

#[test]
fn admission_error_is_quarantined_after_three() {
    let (slot, calls) = admission_slot("bad-admission", erroring_admission);
    let snap = cluster();
    let want = clean(&snap, admission_fallback);
    let mut live = live_with_admission(vec![slot]);
    let mut fb = admission_fallback();
    for cycle in 1..=3 {
        let out = run_cycle(&snap, &mut live, Some(&mut fb));
        assert_one_fault(
            &out,
            Stage::Admission,
            "bad-admission",
            FaultKind::PluginError,
        );
        assert_fallback_decision(&snap, &out, &want);
        assert_eq!(calls.get(), cycle);
    }
    let out = run_cycle(&snap, &mut live, Some(&mut fb));
    assert_one_fault(
        &out,
        Stage::Admission,
        "bad-admission",
        FaultKind::Quarantined,
    );
    assert_fallback_decision(&snap, &out, &want);
    assert_eq!(calls.get(), 3);
}

#[test]
fn admission_wrong_count_is_quarantined_after_three() {
    let (slot, calls) = admission_slot("bad-admission", extra_verdict);
    let snap = cluster();
    let mut live = live_with_admission(vec![slot]);
    let mut fb = admission_fallback();
    for _ in 0..3 {
        run_cycle(&snap, &mut live, Some(&mut fb));
    }
    let out = run_cycle(&snap, &mut live, Some(&mut fb));
    assert_one_fault(
        &out,
        Stage::Admission,
        "bad-admission",
        FaultKind::Quarantined,
    );
    assert_eq!(calls.get(), 3);
}
