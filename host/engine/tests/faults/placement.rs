//! Placement plugins that double-book, split gangs, start unoffered jobs or fail.

use super::*;
use common::{frac, whole};
use gantry_contract::{BookError, Start};
use gantry_engine::{PlanViolation, validate_plan};

/// Job 1 on node 0 GPUs 0+1, then job 4 on GPU 1 again.
fn double_booking(_: &[Job]) -> Result<Plan, PolicyFault> {
    Ok(Plan {
        starts: vec![
            Start {
                job: 1,
                tasks: vec![whole(0, &[0, 1])],
            },
            Start {
                job: 4,
                tasks: vec![whole(0, &[1])],
            },
        ],
        pending: vec![],
        stopped_at: None,
    })
}

/// Job 2 is a gang of two; start one task.
fn half_gang(_: &[Job]) -> Result<Plan, PolicyFault> {
    Ok(Plan {
        starts: vec![Start {
            job: 2,
            tasks: vec![whole(0, &[0])],
        }],
        pending: vec![],
        stopped_at: None,
    })
}

/// Job 999 was never offered (on free, valid resources).
fn unknown_job(_: &[Job]) -> Result<Plan, PolicyFault> {
    Ok(Plan {
        starts: vec![Start {
            job: 999,
            tasks: vec![whole(1, &[0])],
        }],
        pending: vec![],
        stopped_at: None,
    })
}

fn erroring(_: &[Job]) -> Result<Plan, PolicyFault> {
    Err(boom())
}

fn run_bad_placement(script: fn(&[Job]) -> Result<Plan, PolicyFault>) -> CycleOutcome {
    let snap = cluster();
    let (slot, calls) = bad_placement(script);
    let mut live = live_with_placement(slot);
    let out = run_cycle(&snap, &mut live, Some(&mut fallback_pipeline()));
    assert_eq!(calls.get(), 1);
    assert_fallback_decision(&snap, &out, &clean(&snap, fallback_pipeline));
    assert!(
        out.starts.iter().all(|s| s.placed_by == "first-fit"),
        "starts come from the fallback: {:?}",
        out.starts
    );
    out
}

#[test]
fn the_fallback_alone_starts_something() {
    // Guards the fixtures: a fallback that starts nothing would make the
    // comparisons below vacuous.
    let out = clean(&cluster(), fallback_pipeline);
    let started: Vec<JobId> = out.starts.iter().map(|s| s.job).collect();
    assert_eq!(started, vec![1, 2, 3]);
    assert_eq!(codes_of(&out)[0], (4, ReasonCode::InsufficientGpus));
}

#[test]
fn placement_double_booking_a_gpu_is_rejected() {
    let out = run_bad_placement(double_booking);
    assert_one_fault(
        &out,
        Stage::Placement,
        "bad-placement",
        FaultKind::InvalidOutput,
    );
    assert!(
        out.faults[0]
            .fault
            .message
            .contains("booked beyond capacity"),
        "{}",
        out.faults[0].fault.message
    );
}

#[test]
fn placement_starting_half_a_gang_is_rejected() {
    let out = run_bad_placement(half_gang);
    assert_one_fault(
        &out,
        Stage::Placement,
        "bad-placement",
        FaultKind::InvalidOutput,
    );
    assert!(
        out.faults[0].fault.message.contains("all or nothing"),
        "{}",
        out.faults[0].fault.message
    );
}

#[test]
fn placement_starting_an_unoffered_job_is_rejected() {
    let out = run_bad_placement(unknown_job);
    assert_one_fault(
        &out,
        Stage::Placement,
        "bad-placement",
        FaultKind::InvalidOutput,
    );
    assert!(out.starts.iter().all(|s| s.job != 999));
}

#[test]
fn placement_error_falls_back() {
    let out = run_bad_placement(erroring);
    assert_one_fault(
        &out,
        Stage::Placement,
        "bad-placement",
        FaultKind::PluginError,
    );
    assert_eq!(out.faults[0].fault.message, "boom");
}

#[test]
fn placement_error_is_quarantined_after_three() {
    let (slot, calls) = bad_placement(erroring);
    assert_quarantined_after_three(
        &cluster(),
        live_with_placement(slot),
        &calls,
        Stage::Placement,
        "bad-placement",
        FaultKind::PluginError,
    );
}

#[test]
fn placement_double_booking_is_quarantined_after_three() {
    let (slot, calls) = bad_placement(double_booking);
    assert_quarantined_after_three(
        &cluster(),
        live_with_placement(slot),
        &calls,
        Stage::Placement,
        "bad-placement",
        FaultKind::InvalidOutput,
    );
}

#[test]
fn placement_half_gang_is_quarantined_after_three() {
    let (slot, calls) = bad_placement(half_gang);
    assert_quarantined_after_three(
        &cluster(),
        live_with_placement(slot),
        &calls,
        Stage::Placement,
        "bad-placement",
        FaultKind::InvalidOutput,
    );
}

#[test]
fn placement_unknown_job_is_quarantined_after_three() {
    let (slot, calls) = bad_placement(unknown_job);
    assert_quarantined_after_three(
        &cluster(),
        live_with_placement(slot),
        &calls,
        Stage::Placement,
        "bad-placement",
        FaultKind::InvalidOutput,
    );
}

#[test]
fn invalid_placement_faults_are_counted_on_the_slot() {
    // Whatever the quarantine rule, every rejected plan is a fault of the slot.
    let snap = cluster();
    let (slot, _calls) = bad_placement(double_booking);
    let mut live = live_with_placement(slot);
    let mut fb = fallback_pipeline();
    for _ in 0..3 {
        run_cycle(&snap, &mut live, Some(&mut fb));
    }
    assert_eq!(live.placement.total_faults, 3);
}

#[test]
fn a_good_call_resets_the_fault_count() {
    let snap = cluster();
    let mut n = 0;
    let (slot, calls) = bad_placement(move |_| {
        n += 1;
        // Fails twice, succeeds (starting nothing), fails twice more.
        if n == 3 {
            Ok(Plan::default())
        } else {
            Err(boom())
        }
    });
    let mut live = live_with_placement(slot);
    let mut fb = fallback_pipeline();
    for _ in 0..5 {
        run_cycle(&snap, &mut live, Some(&mut fb));
    }
    assert_eq!(calls.get(), 5);
    assert_eq!(live.placement.consecutive_faults, 2);
    assert!(!live.placement.quarantined());
    let out = run_cycle(&snap, &mut live, Some(&mut fb));
    assert_eq!(out.faults[0].fault.kind, FaultKind::PluginError);
    assert!(live.placement.quarantined());
}

#[test]
fn placement_fault_without_fallback_starts_nothing_and_explains() {
    let snap = cluster();
    let (slot, _) = bad_placement(double_booking);
    let mut live = live_with_placement(slot);
    let out = run_cycle(&snap, &mut live, None);
    assert_eq!(out.faults.len(), 1);
    assert!(!out.faults[0].fell_back, "no fallback to fall back to");
    assert!(out.starts.is_empty());
    assert_eq!(out.pending.len(), snap.pending.len());
    for (job, r) in &out.pending {
        assert_eq!(r.code, ReasonCode::Other, "job {job}");
        assert!(r.message.contains("bad-placement"), "{}", r.message);
    }
    assert!(common::check_outcome(&snap, &out).is_empty());
}

#[test]
fn a_faulty_fallback_placement_is_recorded_too() {
    let snap = cluster();
    let (slot, _) = bad_placement(double_booking);
    let mut live = live_with_placement(slot);
    let (fb_slot, _) = bad_placement(half_gang);
    let mut fb = live_with_placement(fb_slot);
    let out = run_cycle(&snap, &mut live, Some(&mut fb));
    assert_eq!(out.faults.len(), 2, "{:#?}", out.faults);
    assert!(out.faults[0].fell_back);
    assert!(!out.faults[1].fell_back);
    assert!(out.starts.is_empty());
    assert!(out.pending.iter().all(|(_, r)| r.code == ReasonCode::Other));
}

/// A named invalid plan and a test for the violation it must be rejected with.
type InvalidPlan = (&'static str, Vec<Start>, fn(&PlanViolation) -> bool);

/// Invalid plans the validator must reject, each with the violation it reports.
fn invalid_plans() -> Vec<InvalidPlan> {
    let s = |job: JobId, tasks: Vec<TaskAllocation>| Start { job, tasks };
    let overbooked = |v: &PlanViolation| {
        matches!(
            v,
            PlanViolation::Booking {
                error: BookError::GpuOverbooked { .. },
                ..
            }
        )
    };
    vec![
        (
            "one GPU twice across jobs",
            double_booking(&[]).map(|p| p.starts).unwrap_or_default(),
            overbooked,
        ),
        (
            "one GPU twice in a task",
            vec![s(1, vec![whole(0, &[2, 2])])],
            overbooked,
        ),
        (
            "fractions over 1000 milli",
            vec![s(3, vec![frac(1, 0, 600)]), s(5, vec![frac(1, 0, 500)])],
            overbooked,
        ),
        (
            "fraction on a GPU held whole",
            vec![s(1, vec![whole(1, &[0, 1])]), s(5, vec![frac(1, 1, 500)])],
            overbooked,
        ),
        (
            "half a gang",
            half_gang(&[]).map(|p| p.starts).unwrap_or_default(),
            |v| {
                matches!(
                    v,
                    PlanViolation::IncompleteGang {
                        expected: 2,
                        got: 1,
                        ..
                    }
                )
            },
        ),
        (
            "gang with an extra task",
            vec![s(4, vec![whole(0, &[0]), whole(0, &[1])])],
            |v| {
                matches!(
                    v,
                    PlanViolation::IncompleteGang {
                        expected: 1,
                        got: 2,
                        ..
                    }
                )
            },
        ),
        (
            "a job never offered",
            unknown_job(&[]).map(|p| p.starts).unwrap_or_default(),
            |v| matches!(v, PlanViolation::UnknownJob(999)),
        ),
        (
            "the same job twice",
            vec![s(4, vec![whole(0, &[0])]), s(4, vec![whole(0, &[1])])],
            |v| matches!(v, PlanViolation::DuplicateStart(4)),
        ),
        ("a draining node", vec![s(4, vec![whole(2, &[0])])], |v| {
            matches!(
                v,
                PlanViolation::Booking {
                    error: BookError::NodeNotUp(2),
                    ..
                }
            )
        }),
        ("an unhealthy GPU", vec![s(4, vec![whole(0, &[3])])], |v| {
            matches!(
                v,
                PlanViolation::Booking {
                    error: BookError::GpuUnhealthy { .. },
                    ..
                }
            )
        }),
        (
            "a disallowed model",
            vec![s(4, vec![whole(1, &[0])])],
            |v| {
                matches!(
                    v,
                    PlanViolation::Booking {
                        error: BookError::ModelNotAllowed { .. },
                        ..
                    }
                )
            },
        ),
        (
            "a GPU the node lacks",
            vec![s(4, vec![whole(0, &[7])])],
            |v| {
                matches!(
                    v,
                    PlanViolation::Booking {
                        error: BookError::UnknownGpu { .. },
                        ..
                    }
                )
            },
        ),
        (
            "a node that does not exist",
            vec![s(4, vec![whole(9, &[0])])],
            |v| {
                matches!(
                    v,
                    PlanViolation::Booking {
                        error: BookError::UnknownNode(9),
                        ..
                    }
                )
            },
        ),
        (
            "fewer GPUs than asked",
            vec![s(1, vec![whole(0, &[0])])],
            |v| {
                matches!(
                    v,
                    PlanViolation::Booking {
                        error: BookError::WrongGpuShape(_),
                        ..
                    }
                )
            },
        ),
        (
            "a whole GPU for a fraction",
            vec![s(3, vec![whole(0, &[0])])],
            |v| {
                matches!(
                    v,
                    PlanViolation::Booking {
                        error: BookError::WrongGpuShape(_),
                        ..
                    }
                )
            },
        ),
        (
            "less CPU than asked",
            vec![s(
                4,
                vec![TaskAllocation {
                    cpu_milli: 1,
                    ..whole(0, &[0])
                }],
            )],
            |v| {
                matches!(
                    v,
                    PlanViolation::Booking {
                        error: BookError::WrongCpuOrMemory(0),
                        ..
                    }
                )
            },
        ),
        (
            "a valid start next to an invalid one",
            vec![s(1, vec![whole(0, &[0, 1])]), s(4, vec![whole(0, &[3])])],
            |v| matches!(v, PlanViolation::Booking { job: 4, .. }),
        ),
    ]
}

#[test]
fn every_invalid_plan_is_rejected_and_replaced_by_the_fallback() {
    let snap = cluster();
    let want = clean(&snap, fallback_pipeline);
    for (name, starts, expected) in invalid_plans() {
        let plan = Plan {
            starts,
            pending: vec![],
            stopped_at: None,
        };
        let violations = validate_plan(&snap.ctx, &snap.pending, &snap.nodes, &plan)
            .err()
            .unwrap_or_else(|| panic!("{name}: validator accepted {plan:?}"));
        assert!(
            violations.iter().any(expected),
            "{name}: unexpected violations {violations:?}"
        );

        let (slot, _) = bad_placement(move |_| Ok(plan.clone()));
        let out = run_cycle(
            &snap,
            &mut live_with_placement(slot),
            Some(&mut fallback_pipeline()),
        );
        assert_one_fault(
            &out,
            Stage::Placement,
            "bad-placement",
            FaultKind::InvalidOutput,
        );
        assert_fallback_decision(&snap, &out, &want);
    }
}

#[test]
fn the_fallback_plan_is_validated_too() {
    let snap = cluster();
    let (slot, _) = bad_placement(erroring);
    let mut live = live_with_placement(slot);
    let (fb_slot, fb_calls) = bad_placement(unknown_job);
    let mut fb = live_with_placement(fb_slot);
    let out = run_cycle(&snap, &mut live, Some(&mut fb));
    assert_eq!(fb_calls.get(), 1);
    assert_eq!(out.faults.len(), 2);
    assert_eq!(out.faults[1].fault.kind, FaultKind::InvalidOutput);
    assert!(out.starts.is_empty(), "{:?}", out.starts);
}
