//! Unit tests of the weighted score and its note, through the plugin's public trait,
//! and of the README's example configuration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::Multifactor;
use gantry_sdk::{ClusterTotals, Cycle, Job, Label, Plugin, Priority, TaskGroup, Usage};

const S: u64 = 1000;

/// Strings: 0 "", 1 vision, 2 nlp, 3 ann, 4 bob, 5 default, 6 debug, 7 gpu, 8 qos,
/// 9 high, 10 low, 11 nice, 12 "7", 13 "lots", 14 "-3".
fn ctx(now_s: u64, vision_usage: f64) -> Cycle {
    Cycle {
        now_ms: now_s * S,
        strings: [
            "", "vision", "nlp", "ann", "bob", "default", "debug", "gpu", "qos", "high", "low",
            "nice", "7", "lots", "-3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        account_usage: vec![Usage {
            who: 1,
            gpu_seconds: vision_usage,
        }],
        user_usage: vec![Usage {
            who: 3,
            gpu_seconds: vision_usage,
        }],
        totals: ClusterTotals {
            nodes: 1,
            gpu_milli_total: 4000,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn job(id: u64, account: u32, user: u32, submit_s: u64, gpus: u32) -> Job {
    Job {
        id,
        account,
        user,
        queue: 5,
        submit_ms: submit_s * S,
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn plugin(json: &str) -> Multifactor {
    let mut p = Multifactor::default();
    p.configure(json).unwrap();
    p
}

const TWO_ACCOUNTS: &str = r#"{"accounts": {"vision": {"shares": 1}, "nlp": {"shares": 1}}}"#;

#[test]
fn defaults_weight_fairshare_age_and_size_as_worked_by_hand() {
    // The golden scenario's first decision: at 36000 s both 4-GPU jobs have waited
    // 6000 s; vision has all the usage (144000 GPU-s), nlp none.
    let jobs = [job(1, 1, 3, 30_000, 4), job(2, 2, 4, 30_000, 4)];
    let s = plugin(TWO_ACCOUNTS)
        .score(&ctx(36_000, 144_000.0), &jobs, &[7.0, 7.0])
        .unwrap();
    let age = 1000.0 * 6000.0 / 604_800.0;
    // vision: 0.25 × 10000 + age + 1 × 1000; nlp: 1 × 10000 + age + 1000.
    assert!(
        (s[0].score - (2500.0 + age + 1000.0)).abs() < 1e-9,
        "{}",
        s[0].score
    );
    assert!((s[1].score - (10_000.0 + age + 1000.0)).abs() < 1e-9);
    assert!(s.iter().all(|x| x.tier.is_none()));
    assert_eq!(
        s[0].note.as_deref(),
        Some(
            "priority 3509.9 = fair-share 0.25×10000 [account vision used 40.0 GPU-h = 100% of usage, share 50%] + age 0.01×1000 [waited 1h40m of 7d] + size 1.00×1000 [4 of 4 GPUs] + queue 0.00×1000 [queue default not configured]"
        )
    );
}

#[test]
fn queue_qos_and_nice_are_weighted_and_explained() {
    let p = plugin(
        r#"{"weights": {"fairshare": 0, "age": 0, "jobsize": 0, "qos": 500},
            "queues": {"gpu": 4, "debug": 1}, "qos": {"high": 2, "low": 1}}"#,
    );
    let mut j = job(1, 1, 3, 0, 1);
    j.queue = 6;
    j.labels = vec![Label { key: 8, value: 10 }, Label { key: 11, value: 12 }];
    let mut k = job(2, 1, 3, 0, 1);
    k.queue = 7;
    k.labels = vec![Label { key: 8, value: 9 }, Label { key: 11, value: 14 }];
    let mut unknown = job(3, 1, 3, 0, 1);
    unknown.labels = vec![Label { key: 8, value: 7 }, Label { key: 11, value: 13 }];
    let mut p = p;
    let s = p.score(&ctx(0, 0.0), &[j, k, unknown], &[]).unwrap();
    // debug 1/4 × 1000 + low 1/2 × 500 − 7.
    assert_eq!(s[0].score, 250.0 + 250.0 - 7.0);
    // gpu 1 × 1000 + high 1 × 500 + 3.
    assert_eq!(s[1].score, 1000.0 + 500.0 + 3.0);
    // Unlisted queue and QoS: 0; a non-integer nice is ignored.
    assert_eq!(s[2].score, 0.0);
    assert_eq!(
        s[0].note.as_deref(),
        Some("priority 493.0 = queue 0.25×1000 [queue debug] + qos 0.50×500 [qos low] − nice 7")
    );
    assert_eq!(
        s[2].note.as_deref(),
        Some(
            "priority 0.0 = queue 0.00×1000 [queue default not configured] + qos 0.00×500 [qos gpu not configured] (nice label \"lots\" is not an integer, ignored)"
        )
    );
}

#[test]
fn favor_small_and_max_age_change_size_and_age() {
    let mut p = plugin(
        r#"{"favor_small": true, "max_age_s": 3600, "weights": {"fairshare": 0, "queue": 0}}"#,
    );
    // 1 of 4 GPUs: size 0.75; waited 1800 of 3600 s: age 0.5; another waited 2 h: 1.
    let s = p
        .score(
            &ctx(7200, 0.0),
            &[job(1, 1, 3, 5400, 1), job(2, 1, 3, 0, 4)],
            &[],
        )
        .unwrap();
    assert_eq!(s[0].score, 500.0 + 750.0);
    assert_eq!(s[1].score, 1000.0);
    assert!(
        s[0].note
            .as_deref()
            .unwrap()
            .contains("size 0.75×1000 [1 of 4 GPUs, favouring small]")
    );
}

#[test]
fn all_weights_zero_scores_zero() {
    let mut p =
        plugin(r#"{"weights": {"age": 0, "fairshare": 0, "jobsize": 0, "queue": 0, "qos": 0}}"#);
    let s = p.score(&ctx(10, 0.0), &[job(1, 1, 3, 0, 4)], &[]).unwrap();
    assert_eq!(s[0].score, 0.0);
    assert_eq!(s[0].note.as_deref(), Some("priority 0.0 = all weights 0"));
}

#[test]
fn configure_rejects_bad_config_and_keeps_naming_the_key() {
    let mut p = Multifactor::default();
    let e = p.configure(r#"{"weights": {"age": -1}}"#).unwrap_err();
    assert!(e.contains("weights.age"), "{e}");
    let e = p.configure(r#"{"fairshare_weight": 1}"#).unwrap_err();
    assert!(e.contains("fairshare_weight"), "{e}");
    assert_eq!(p.metadata().name, "multifactor");
}

/// The first ```json block of the README.
fn readme_example() -> &'static str {
    let readme = include_str!("../README.md");
    let start = readme.find("```json").expect("README has a json block") + "```json".len();
    let len = readme[start..].find("```").expect("closed block");
    &readme[start..start + len]
}

#[test]
fn readme_example_config_parses() {
    let p = Multifactor::with_config(readme_example()).unwrap();
    let c = p.config();
    assert!(!c.fair_tree);
    assert_eq!(c.weights.fairshare, 10_000.0);
    assert_eq!(c.weights.qos, 2000.0);
    assert_eq!(c.accounts["vision"].shares, 2.0);
    assert_eq!(c.accounts["vision"].users.as_ref().unwrap()["ann"], 1.0);
    assert_eq!(c.accounts["nlp"].users, None);
    assert_eq!(c.queues["debug"], 500.0);
    assert_eq!(c.qos["high"], 100.0);
}
