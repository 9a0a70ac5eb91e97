//! Unit tests of quota with flavors (quotas per GPU model): submit rejections of jobs
//! not pinned to one flavor, per-flavor holds with numbers, per-flavor "queues below
//! nominal first", and jobs without GPUs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use gantry_sdk::{QueueStatus, TaskGroup};

const FLAVORS: &str = r#"{"queues": {
    "team-a": {"cohort": "lab", "flavors": {
        "A100": {"nominal_gpus": 8, "borrowing_limit_gpus": 4, "lending_limit_gpus": null},
        "L4": {"nominal_gpus": 8, "borrowing_limit_gpus": 4}}},
    "team-b": {"cohort": "lab", "flavors": {
        "A100": {"nominal_gpus": 8, "borrowing_limit_gpus": 4},
        "L4": {"nominal_gpus": 8, "borrowing_limit_gpus": 4}}}}}"#;

const A100: u64 = 0b1;
const L4: u64 = 0b10;
const H100: u64 = 0b100;

/// Symbols: 0 team-a, 1 team-b, 2 A100, 3 L4, 4 H100. `a` and `b` are GPUs in use per
/// model (A100, L4, H100).
fn ctx(a: [u64; 3], b: [u64; 3]) -> Cycle {
    let status = |queue: u32, used: [u64; 3]| QueueStatus {
        queue,
        gpu_milli_quota: None,
        gpu_milli_used: used.iter().sum::<u64>() * 1000,
        pending_jobs: 0,
        gpu_milli_used_by_model: used.iter().map(|g| g * 1000).collect(),
    };
    Cycle {
        strings: ["team-a", "team-b", "A100", "L4", "H100"]
            .map(String::from)
            .to_vec(),
        gpu_models: vec![2, 3, 4],
        queues: vec![status(0, a), status(1, b)],
        ..Default::default()
    }
}

fn job(id: u64, queue: u32, gpus: u32, mask: u64) -> Job {
    Job {
        id,
        queue,
        submit_ms: id,
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_model_mask: mask,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn plugin(config: &str) -> Quota {
    let mut p = Quota::default();
    p.configure(config).unwrap();
    p
}

fn held(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Admit => None,
        Verdict::Hold(r) => {
            assert_eq!(r.code, ReasonCode::HeldByPolicy);
            Some(&r.message)
        }
    }
}

const UNPINNED: &str =
    "queue team-a has quotas per GPU model (A100, L4); ask for one of them with gpu_models";

#[test]
fn submit_rejects_gpu_jobs_not_pinned_to_exactly_one_flavor() {
    let mut p = plugin(FLAVORS);
    let c = ctx([0; 3], [0; 3]);
    let verdict = |p: &mut Quota, j: Job| p.check_submit(&c, &j).unwrap();
    assert_eq!(
        verdict(&mut p, job(1, 0, 1, 0)),
        SubmitVerdict::Reject(format!("{UNPINNED} (the job allows any model)"))
    );
    assert_eq!(
        verdict(&mut p, job(1, 0, 1, A100 | L4)),
        SubmitVerdict::Reject(format!(
            "{UNPINNED} (the job allows A100|L4; all its GPU tasks must ask for the same single model)"
        ))
    );
    assert_eq!(
        verdict(&mut p, job(1, 0, 1, H100)),
        SubmitVerdict::Reject(format!(
            "{UNPINNED} (the job asks for H100, which is not one of them)"
        ))
    );
    let mut two_models = job(1, 0, 1, A100);
    two_models.tasks.push(TaskGroup {
        gpu_model_mask: L4,
        ..two_models.tasks[0]
    });
    assert!(matches!(
        verdict(&mut p, two_models),
        SubmitVerdict::Reject(m) if m.contains("(the job allows A100|L4;")
    ));
    assert_eq!(verdict(&mut p, job(1, 0, 12, A100)), SubmitVerdict::Accept);
    assert_eq!(verdict(&mut p, job(1, 0, 0, 0)), SubmitVerdict::Accept);
    assert_eq!(
        verdict(&mut p, job(1, 0, 13, L4)),
        SubmitVerdict::Reject(
            "job needs 13 GPUs but queue team-a flavor L4 can never hold more than 12 \
             (8 nominal + borrowing limit 4 in cohort lab)"
                .into()
        )
    );
}

#[test]
fn each_flavor_has_its_own_nominal_quota_and_borrowing_limit() {
    // team-a holds 12 A100 (borrowing 4, its limit) and nothing on L4.
    let jobs = [job(1, 0, 1, A100), job(2, 0, 8, L4), job(3, 0, 1, L4)];
    let v = plugin(FLAVORS)
        .admit(&ctx([12, 0, 0], [0; 3]), &jobs)
        .unwrap();
    assert_eq!(
        held(&v[0]),
        Some(
            "queue team-a flavor A100: 8 of 8 GPUs nominal in use, borrowing 4 of limit 4 from \
             cohort lab; job needs 1, which would make it borrow 5"
        )
    );
    assert!(held(&v[1]).is_none(), "8 L4 fit the L4 nominal quota");
    assert!(
        held(&v[2]).is_none(),
        "the 9th L4 GPU borrows from team-b's L4"
    );
    // team-b's L4 is busy: team-a's L4 cannot borrow, whatever A100 is free.
    let v = plugin(FLAVORS)
        .admit(&ctx([0, 8, 0], [0, 8, 0]), &[job(1, 0, 1, L4)])
        .unwrap();
    assert_eq!(
        held(&v[0]),
        Some(
            "queue team-a flavor L4: 8 of 8 GPUs nominal in use, borrowing 0 of limit 4 from \
             cohort lab; cohort lab can lend 0 more; job needs 1, which would borrow 1 more"
        )
    );
}

#[test]
fn a_peer_below_nominal_holds_borrowers_of_its_flavor_only() {
    // team-a at nominal on both models; team-b has a 2-GPU A100 job pending.
    let jobs = [job(1, 0, 1, A100), job(2, 0, 1, L4), job(3, 1, 2, A100)];
    let v = plugin(FLAVORS)
        .admit(&ctx([8, 8, 0], [0; 3]), &jobs)
        .unwrap();
    assert!(held(&v[2]).is_none());
    assert_eq!(
        held(&v[0]),
        Some(
            "queue team-a flavor A100: 8 of 8 GPUs nominal in use, borrowing 0 of limit 4 from \
             cohort lab; job needs 1 and would borrow, but queue team-b flavor A100 of cohort \
             lab is below its nominal quota (0 of 8 GPUs in use) with 1 pending jobs (2 GPUs) \
             that fit it; queues below nominal are served before borrowers"
        )
    );
    assert!(held(&v[1]).is_none(), "team-b's L4 has no pending work");
}

#[test]
fn unpinned_jobs_that_reach_a_cycle_are_held_and_jobs_without_gpus_admitted() {
    // E.g. submitted before the queue got flavors.
    let jobs = [job(1, 0, 1, 0), job(2, 0, 0, 0), job(3, 1, 0, 0)];
    let v = plugin(FLAVORS)
        .admit(&ctx([12, 12, 0], [8, 8, 0]), &jobs)
        .unwrap();
    assert_eq!(
        held(&v[0]),
        Some(format!("{UNPINNED} (the job allows any model)").as_str())
    );
    assert!(held(&v[1]).is_none());
    assert!(held(&v[2]).is_none());
    // team-b's job without GPUs is not "pending work within nominal": team-a borrows.
    let v = plugin(FLAVORS)
        .admit(
            &ctx([8, 0, 0], [0; 3]),
            &[job(3, 1, 0, 0), job(4, 0, 1, A100)],
        )
        .unwrap();
    assert!(v.iter().all(|v| held(v).is_none()), "{v:?}");
}

#[test]
fn a_queue_with_totals_ignores_models_and_its_jobs_need_no_pin() {
    let config = r#"{"queues": {"team-a": {"nominal_gpus": 2}}}"#;
    let v = plugin(config)
        .admit(
            &ctx([1, 0, 0], [0; 3]),
            &[job(1, 0, 1, 0), job(2, 0, 1, L4)],
        )
        .unwrap();
    assert!(held(&v[0]).is_none());
    assert_eq!(
        held(&v[1]),
        Some(
            "queue team-a: 2 of 2 GPUs nominal in use (counting 1 GPUs of jobs admitted this \
             cycle); no cohort to borrow from; job needs 1"
        )
    );
}
