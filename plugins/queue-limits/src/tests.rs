#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use gantry_sdk::TaskGroup;

const NOTEBOOKS: &str = r#"{"queues": {
    "interactive": {"max_gpus_per_job": 1, "max_time_limit_s": 14400, "default_time_limit_s": 14400,
                    "kinds": ["interactive"], "preemptible": true, "tier": 0},
    "training": {"tier": 1}},
  "unlisted": "reject"}"#;

fn plugin(config: &str) -> QueueLimitsPlugin {
    let mut p = QueueLimitsPlugin::default();
    p.configure(config).unwrap();
    p
}

fn job(kind: JobKind, gpus: u32, milli: u32, limit_s: u64) -> Job {
    Job {
        id: 1,
        kind,
        time_limit_s: limit_s,
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            gpu_milli: milli,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_model_mask: 0,
        }],
        ..Job::default()
    }
}

fn rejected(v: SubmitVerdict) -> String {
    match v {
        SubmitVerdict::Reject(m) => m,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn notebook_queue_limits_gpus_time_and_kind_and_fills_defaults() {
    let p = plugin(NOTEBOOKS);
    let m = rejected(p.verdict("interactive", &job(JobKind::Interactive, 2, 0, 3600)));
    assert!(
        m.contains("at most 1 GPUs per job") && m.contains("asks 2"),
        "{m}"
    );
    let m = rejected(p.verdict("interactive", &job(JobKind::Interactive, 1, 0, 6 * 3600)));
    assert!(m.contains("at most 4h") && m.contains("asked 6h"), "{m}");
    let m = rejected(p.verdict("interactive", &job(JobKind::Batch, 1, 0, 3600)));
    assert!(m.contains("takes interactive jobs, not batch"), "{m}");
    // No limit given: the default is filled in, and the job becomes preemptible.
    match p.verdict("interactive", &job(JobKind::Interactive, 0, 500, 0)) {
        SubmitVerdict::AcceptWith(patch) => {
            assert_eq!(patch.time_limit_s, Some(14_400));
            assert_eq!(patch.preemptible, Some(true));
            assert_eq!(patch.tier, None);
        }
        other => panic!("{other:?}"),
    }
    match p.verdict("training", &job(JobKind::Batch, 8, 0, 0)) {
        SubmitVerdict::AcceptWith(patch) => assert_eq!(patch.tier, Some(1)),
        other => panic!("{other:?}"),
    }
    let m = rejected(p.verdict("scratch", &job(JobKind::Batch, 1, 0, 0)));
    assert!(
        m.contains("queue scratch does not exist") && m.contains("interactive, training"),
        "{m}"
    );
}

#[test]
fn a_maximum_without_default_rejects_jobs_without_a_limit() {
    let p = plugin(r#"{"queues": {"short": {"max_time_limit_s": 1800}}}"#);
    let m = rejected(p.verdict("short", &job(JobKind::Batch, 1, 0, 0)));
    assert!(m.contains("needs a time limit of at most 0.5h"), "{m}");
    assert_eq!(
        p.verdict("short", &job(JobKind::Batch, 1, 0, 600)),
        SubmitVerdict::Accept
    );
    // Unlisted queues are accepted by default.
    assert_eq!(
        p.verdict("other", &job(JobKind::Batch, 4, 0, 0)),
        SubmitVerdict::Accept
    );
}

#[test]
fn bad_config_names_the_key() {
    let mut p = QueueLimitsPlugin::default();
    let e = p
        .configure(r#"{"queues": {"a": {"max_gpu": 1}}}"#)
        .unwrap_err();
    assert!(e.contains("max_gpu"), "{e}");
    let e = p
        .configure(r#"{"queues": {"a": {"max_time_limit_s": 60, "default_time_limit_s": 120}}}"#)
        .unwrap_err();
    assert!(e.contains("queues.a.default_time_limit_s"), "{e}");
}
