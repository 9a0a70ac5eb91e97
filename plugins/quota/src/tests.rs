//! Unit tests of the quota plugin: the two passes, holds with numbers, submit checks,
//! unlisted queues and config errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use gantry_sdk::{QueueStatus, TaskGroup};

const CONFIG: &str = r#"{"queues": {
    "team-a": {"nominal_gpus": 16, "borrowing_limit_gpus": 8, "cohort": "lab"},
    "team-b": {"nominal_gpus": 16, "borrowing_limit_gpus": 8, "cohort": "lab"},
    "solo": {"nominal_gpus": 2}}}"#;

/// Symbols: 0 team-a, 1 team-b, 2 solo, 3 other.
fn ctx(used_a: u64, used_b: u64) -> Cycle {
    Cycle {
        strings: vec![
            "team-a".into(),
            "team-b".into(),
            "solo".into(),
            "other".into(),
        ],
        queues: vec![
            QueueStatus {
                queue: 0,
                gpu_milli_quota: None,
                gpu_milli_used: used_a * 1000,
                pending_jobs: 0,
                ..Default::default()
            },
            QueueStatus {
                queue: 1,
                gpu_milli_quota: None,
                gpu_milli_used: used_b * 1000,
                pending_jobs: 0,
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

fn job(id: u64, queue: u32, gpus: u32) -> Job {
    Job {
        id,
        queue,
        submit_ms: id,
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            cpu_milli: 1000,
            memory_mib: 1024,
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

#[test]
fn admits_up_to_nominal_plus_borrowing_limit_counting_earlier_admits() {
    let jobs: Vec<Job> = (1..=10).map(|i| job(i, 0, 3)).collect();
    let v = plugin(CONFIG).admit(&ctx(0, 0), &jobs).unwrap();
    // 3 GPUs each: 5 jobs = 15 within nominal; 8 jobs = 24 = 16 + 8 borrowed; the 9th
    // would borrow 11.
    let admitted = v.iter().filter(|v| held(v).is_none()).count();
    assert_eq!(admitted, 8);
    assert_eq!(
        held(&v[8]),
        Some(
            "queue team-a: 16 of 16 GPUs nominal in use, borrowing 8 of limit 8 from cohort lab \
             (counting 24 GPUs of jobs admitted this cycle); job needs 3, which would make it borrow 11"
        )
    );
}

#[test]
fn a_borrower_waits_while_a_peer_below_nominal_has_pending_work() {
    // team-a runs 16 (at nominal); team-b runs 10 and has a 2-GPU job pending.
    let jobs = [job(1, 0, 1), job(2, 1, 2), job(3, 0, 1)];
    let v = plugin(CONFIG).admit(&ctx(16, 10), &jobs).unwrap();
    assert!(held(&v[1]).is_none(), "team-b's job fits its nominal");
    let m = held(&v[0]).unwrap();
    assert!(
        m.contains("queue team-b of cohort lab is below its nominal quota (10 of 16 GPUs in use) with 1 pending jobs (2 GPUs)"),
        "{m}"
    );
    assert!(held(&v[2]).is_some());
    // Without team-b's pending job, team-a borrows (team-b lends 6).
    let v = plugin(CONFIG)
        .admit(&ctx(16, 10), &[job(1, 0, 1), job(3, 0, 5)])
        .unwrap();
    assert!(v.iter().all(|v| held(v).is_none()));
    let v = plugin(CONFIG)
        .admit(&ctx(16, 10), &[job(1, 0, 4), job(3, 0, 3)])
        .unwrap();
    assert!(held(&v[0]).is_none());
    assert_eq!(
        held(&v[1]),
        Some(
            "queue team-a: 16 of 16 GPUs nominal in use, borrowing 4 of limit 8 from cohort lab \
             (counting 4 GPUs of jobs admitted this cycle); cohort lab can lend 2 more; \
             job needs 3, which would borrow 3 more"
        )
    );
}

#[test]
fn nominal_pass_runs_before_borrowers_whatever_the_submit_order() {
    // team-a at 16 submitted first asks to borrow 6; team-b's job asks for its last 10.
    let jobs = [job(1, 0, 6), job(2, 1, 10)];
    let v = plugin(CONFIG).admit(&ctx(16, 6), &jobs).unwrap();
    assert!(held(&v[1]).is_none());
    assert!(held(&v[0]).is_some());
}

#[test]
fn queue_without_cohort_is_capped_at_nominal() {
    let v = plugin(CONFIG)
        .admit(&ctx(0, 0), &[job(1, 2, 2), job(2, 2, 1)])
        .unwrap();
    assert!(held(&v[0]).is_none());
    assert_eq!(
        held(&v[1]),
        Some(
            "queue solo: 2 of 2 GPUs nominal in use (counting 2 GPUs of jobs admitted this cycle); \
             no cohort to borrow from; job needs 1"
        )
    );
}

#[test]
fn unlisted_queues_admit_hold_or_reject_as_configured() {
    let jobs = [job(1, 3, 64)];
    let v = plugin(CONFIG).admit(&ctx(0, 0), &jobs).unwrap();
    assert!(held(&v[0]).is_none());
    let hold_cfg = CONFIG.replacen('{', r#"{"unlisted": "hold", "#, 1);
    let v = plugin(&hold_cfg).admit(&ctx(0, 0), &jobs).unwrap();
    assert_eq!(
        held(&v[0]),
        Some(
            "queue other has no quota configured and unlisted queues are held (config `unlisted`: \"hold\")"
        )
    );
    let reject_cfg = CONFIG.replacen('{', r#"{"unlisted": "reject", "#, 1);
    let r = plugin(&reject_cfg)
        .check_submit(&ctx(0, 0), &jobs[0])
        .unwrap();
    assert!(matches!(r, SubmitVerdict::Reject(m) if m.starts_with("queue other has no quota")));
}

#[test]
fn submit_rejects_a_job_that_could_never_fit_its_queue() {
    let mut p = plugin(CONFIG);
    assert_eq!(
        p.check_submit(&ctx(0, 0), &job(1, 0, 24)).unwrap(),
        SubmitVerdict::Accept
    );
    assert_eq!(
        p.check_submit(&ctx(0, 0), &job(1, 0, 25)).unwrap(),
        SubmitVerdict::Reject(
            "job needs 25 GPUs but queue team-a can never hold more than 24 (16 nominal + borrowing limit 8 in cohort lab)"
                .into()
        )
    );
    assert!(matches!(
        p.check_submit(&ctx(0, 0), &job(1, 2, 3)).unwrap(),
        SubmitVerdict::Reject(m) if m.ends_with("(2 nominal + no cohort to borrow from)")
    ));
}

#[test]
fn cpu_only_jobs_are_always_admitted() {
    let v = plugin(CONFIG).admit(&ctx(24, 8), &[job(1, 0, 0)]).unwrap();
    assert!(held(&v[0]).is_none());
}

#[test]
fn config_errors_name_the_key() {
    let mut p = Quota::default();
    let e = p.configure(r#"{"queue": {}}"#).unwrap_err();
    assert!(e.contains("unknown field `queue`"), "{e}");
    let e = p
        .configure(r#"{"queues": {"a": {"nominal_gpus": 1, "borrowing_limit": 2}}}"#)
        .unwrap_err();
    assert!(
        e.starts_with("invalid config: queues.a: unknown field `borrowing_limit`"),
        "{e}"
    );
    let e = p.configure(r#"{"unlisted": "drop"}"#).unwrap_err();
    assert!(e.contains("unknown variant `drop`"), "{e}");
    p.configure("").unwrap();
    let v = p.admit(&ctx(0, 0), &[job(1, 0, 99)]).unwrap();
    assert!(
        held(&v[0]).is_none(),
        "no queues configured: every queue is unlisted"
    );
}
