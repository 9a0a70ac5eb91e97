//! Preemption plugins that evict what they may not, or fail.

use super::*;
use common::whole;

/// A full 2-GPU node: job 11 (tier 0, preemptible) on GPU 0, job 12 (tier 0, not
/// preemptible) on GPU 1. Pending: job 1 (tier 1, 1 GPU).
fn preemption_cluster() -> Snapshot {
    let mut n = node(0, 2, common::A100);
    for g in &mut n.gpus {
        g.free_milli = 0;
    }
    n.cpu_milli_free -= 2000;
    n.memory_mib_free -= 2048;
    let run = |id: JobId, gpu: u32, preemptible: bool| RunningJob {
        job: Job {
            preemptible,
            ..job(id, 1, 1)
        },
        tasks: vec![whole(0, &[gpu])],
        start_ms: 500,
        expected_end_ms: None,
        score: -1000.0,
        revision: 0,
    };
    let mut snap = common::snapshot(
        vec![n],
        vec![Job {
            tier: 1,
            ..job(1, 1, 1)
        }],
    );
    snap.running = vec![run(11, 0, true), run(12, 1, false)];
    snap
}

fn eviction(job: JobId, for_job: JobId) -> Eviction {
    Eviction {
        job,
        for_job,
        reason: Reason::new(ReasonCode::Preempted, "test"),
        grace_s: 1,
        warn_s: 0,
    }
}

fn live_with_preemption(slot: StageSlot<dyn PreemptionStage>) -> Pipeline {
    Pipeline {
        admission: vec![],
        priority: vec![common::fifo()],
        placement: common::first_fit("{}"),
        preemption: Some(slot),
    }
}

#[test]
fn invalid_evictions_are_rejected_and_replaced_by_the_fallback() {
    let snap = preemption_cluster();
    let want = clean(&snap, fallback_pipeline);
    assert_eq!(
        want.evictions
            .iter()
            .map(|e| (e.job, e.for_job))
            .collect::<Vec<_>>(),
        vec![(11, 1)]
    );
    let cases: Vec<(&str, Vec<Eviction>)> = vec![
        ("not preemptible", vec![eviction(12, 1)]),
        ("not running", vec![eviction(77, 1)]),
        ("evicted twice", vec![eviction(11, 1), eviction(11, 1)]),
        ("for a job that is not blocked", vec![eviction(11, 55)]),
    ];
    for (name, evictions) in cases {
        let (slot, _) = bad_preemption(move |_| Ok(evictions.clone()));
        let out = run_cycle(
            &snap,
            &mut live_with_preemption(slot),
            Some(&mut fallback_pipeline()),
        );
        assert_one_fault(
            &out,
            Stage::Preemption,
            "bad-preemption",
            FaultKind::InvalidOutput,
        );
        assert_fallback_decision(&snap, &out, &want);
        assert_eq!(
            out.pending[0].1.code,
            ReasonCode::WaitingForPreemption,
            "{name}"
        );
    }
}

#[test]
fn preemption_error_falls_back() {
    let snap = preemption_cluster();
    let (slot, _) = bad_preemption(|_| Err(boom()));
    let out = run_cycle(
        &snap,
        &mut live_with_preemption(slot),
        Some(&mut fallback_pipeline()),
    );
    assert_one_fault(
        &out,
        Stage::Preemption,
        "bad-preemption",
        FaultKind::PluginError,
    );
    assert_fallback_decision(&snap, &out, &clean(&snap, fallback_pipeline));
}

#[test]
fn an_eviction_already_under_way_is_not_repeated() {
    let mut snap = preemption_cluster();
    snap.evicting = vec![gantry_engine::EvictionInProgress {
        job: 11,
        for_job: 1,
    }];
    let (slot, calls) = bad_preemption(|b| Ok(vec![eviction(11, b[0].id)]));
    let out = run_cycle(&snap, &mut live_with_preemption(slot), None);
    assert_eq!(
        calls.get(),
        0,
        "preemption is not asked while evictions run"
    );
    assert!(out.evictions.is_empty());
    assert!(out.faults.is_empty());
    assert_eq!(out.pending[0].1.code, ReasonCode::WaitingForPreemption);
}

#[test]
fn preemption_error_is_quarantined_after_three() {
    let (slot, calls) = bad_preemption(|_| Err(boom()));
    assert_quarantined_after_three(
        &preemption_cluster(),
        live_with_preemption(slot),
        &calls,
        Stage::Preemption,
        "bad-preemption",
        FaultKind::PluginError,
    );
}

#[test]
fn invalid_evictions_are_quarantined_after_three() {
    let (slot, calls) = bad_preemption(|b| Ok(vec![eviction(12, b[0].id)]));
    assert_quarantined_after_three(
        &preemption_cluster(),
        live_with_preemption(slot),
        &calls,
        Stage::Preemption,
        "bad-preemption",
        FaultKind::InvalidOutput,
    );
}
