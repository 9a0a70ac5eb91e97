//! Unit tests of quotas per GPU model (flavors): accounts and peers, per-flavor
//! arithmetic and messages, which flavor a job is charged to, and config errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::charge::{Charge, add_queue_status, job_charge, ledger_from_cycle};
use crate::message::{describe, never_fits, peer_first};
use crate::{ConfigError, Ledger, Outcome, Quotas};
use gantry_sdk::{Cycle, Job, QueueStatus, TaskGroup};
use std::collections::BTreeMap;

fn quotas(json: &str) -> Result<Quotas, ConfigError> {
    let map: BTreeMap<String, serde_json::Value> = serde_json::from_str(json).unwrap();
    Quotas::from_map(&map)
}

/// team-a and team-b: A100 and L4 nominal 8 each, borrowing limit 4, cohort lab;
/// solo: totals of 2, no cohort.
fn two_teams() -> Quotas {
    quotas(
        r#"{"team-a": {"cohort": "lab", "flavors": {
                "A100": {"nominal_gpus": 8, "borrowing_limit_gpus": 4},
                "L4": {"nominal_gpus": 8, "borrowing_limit_gpus": 4, "lending_limit_gpus": null}}},
            "team-b": {"cohort": "lab", "flavors": {
                "A100": {"nominal_gpus": 8, "borrowing_limit_gpus": 4},
                "L4": {"nominal_gpus": 8, "borrowing_limit_gpus": 4}}},
            "solo": {"nominal_gpus": 2}}"#,
    )
    .unwrap()
}

const G: u64 = 1000;

fn flavor(q: &Quotas, queue: &str, model: &str) -> usize {
    q.flavor_account(q.index(queue).unwrap(), model).unwrap()
}

#[test]
fn each_flavor_is_an_account_whose_peers_are_the_same_flavor_of_the_cohort() {
    let q = two_teams();
    let (aa, al) = (flavor(&q, "team-a", "A100"), flavor(&q, "team-a", "L4"));
    let (ba, bl) = (flavor(&q, "team-b", "A100"), flavor(&q, "team-b", "L4"));
    assert_eq!(q.account_count(), 5);
    assert_eq!(q.cohort_peers(aa).collect::<Vec<_>>(), vec![ba]);
    assert_eq!(q.cohort_peers(bl).collect::<Vec<_>>(), vec![al]);
    let team_a = q.index("team-a").unwrap();
    assert!(q.is_flavored(team_a));
    assert_eq!(q.totals_account(team_a), None);
    assert_eq!(q.flavor_account(team_a, "H100"), None);
    assert_eq!(q.flavor_names(team_a), vec!["A100", "L4"]);
    assert_eq!(q.counterpart(aa, q.index("team-b").unwrap()), Some(ba));
    assert_eq!(q.max_ever_milli(aa), 12 * G);
    let solo = q.index("solo").unwrap();
    assert_eq!(q.flavor_account(solo, "A100"), None);
    assert!(q.totals_account(solo).is_some());
}

#[test]
fn borrowing_is_limited_per_flavor_with_the_flavor_in_the_message() {
    let q = two_teams();
    let (aa, al) = (flavor(&q, "team-a", "A100"), flavor(&q, "team-a", "L4"));
    let mut l = Ledger::new(&q);
    l.add(aa, 11 * G);
    assert_eq!(
        l.assess(aa, G).outcome,
        Outcome::Borrows {
            borrow_after: 4 * G
        }
    );
    l.add(aa, G);
    let x = l.assess(aa, G);
    assert_eq!(
        describe(&q, &x),
        "queue team-a flavor A100: 8 of 8 GPUs nominal in use, borrowing 4 of limit 4 from \
         cohort lab; job needs 1, which would make it borrow 5"
    );
    // A100 borrowing does not touch the L4 quota.
    assert_eq!(l.assess(al, 8 * G).outcome, Outcome::WithinNominal);
    assert_eq!(
        never_fits(&q, aa, 13 * G),
        "job needs 13 GPUs but queue team-a flavor A100 can never hold more than 12 \
         (8 nominal + borrowing limit 4 in cohort lab)"
    );
}

#[test]
fn a_flavor_borrows_only_the_same_flavor_of_its_peers() {
    let q = two_teams();
    let (aa, al) = (flavor(&q, "team-a", "A100"), flavor(&q, "team-a", "L4"));
    let (ba, bl) = (flavor(&q, "team-b", "A100"), flavor(&q, "team-b", "L4"));
    let mut l = Ledger::new(&q);
    l.add(aa, 8 * G);
    l.add(al, 8 * G);
    l.add(bl, 8 * G);
    // team-b's A100 is idle, its L4 full: team-a may borrow A100 only.
    assert_eq!(l.cohort_free(aa), 8 * G);
    assert_eq!(l.cohort_free(al), 0);
    let x = l.assess(al, G);
    assert_eq!(x.outcome, Outcome::CohortShort { extra: G });
    assert_eq!(
        describe(&q, &x),
        "queue team-a flavor L4: 8 of 8 GPUs nominal in use, borrowing 0 of limit 4 from \
         cohort lab; cohort lab can lend 0 more; job needs 1, which would borrow 1 more"
    );
    // team-b reserves 3 A100 this cycle: team-a's A100 borrower waits for it.
    l.reserve(ba, 3 * G);
    let y = l.assess(aa, G);
    assert_eq!(
        peer_first(&l, &y, ba, 3),
        "queue team-a flavor A100: 8 of 8 GPUs nominal in use, borrowing 0 of limit 4 from \
         cohort lab; job needs 1 and would borrow, but queue team-b flavor A100 of cohort lab \
         is below its nominal quota (0 of 8 GPUs in use) with 3 pending jobs (3 GPUs) that \
         fit it; queues below nominal are served before borrowers"
    );
}

/// Models: 0 A100, 1 L4, 2 H100. Symbols: 0 team-a, 1 solo, 2 other, 3.. models.
fn ctx() -> Cycle {
    Cycle {
        strings: ["team-a", "solo", "other", "A100", "L4", "H100"]
            .map(String::from)
            .to_vec(),
        gpu_models: vec![3, 4, 5],
        ..Default::default()
    }
}

/// A job of `queue` with one group per mask, 1 GPU per task (0 GPUs when `gpus` is 0).
fn job(queue: u32, gpus: u32, masks: &[u64]) -> Job {
    Job {
        id: 1,
        queue,
        tasks: masks
            .iter()
            .map(|&gpu_model_mask| TaskGroup {
                count: 2,
                gpus,
                cpu_milli: 1000,
                gpu_model_mask,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn a_job_is_charged_to_the_one_flavor_it_asks_for() {
    let q = two_teams();
    let c = ctx();
    let unpinned = |j: &Job| match job_charge(&q, &c, j) {
        Charge::Unpinned(u) => u.to_string(),
        other => panic!("{other:?}"),
    };
    let head =
        "queue team-a has quotas per GPU model (A100, L4); ask for one of them with gpu_models";
    assert_eq!(
        job_charge(&q, &c, &job(0, 1, &[0b1, 0b1])),
        Charge::Account(flavor(&q, "team-a", "A100"))
    );
    assert_eq!(
        job_charge(&q, &c, &job(0, 1, &[0b10])),
        Charge::Account(flavor(&q, "team-a", "L4"))
    );
    assert_eq!(
        unpinned(&job(0, 1, &[0])),
        format!("{head} (the job allows any model)")
    );
    assert_eq!(
        unpinned(&job(0, 1, &[0b11])),
        format!(
            "{head} (the job allows A100|L4; all its GPU tasks must ask for the same single model)"
        )
    );
    assert!(unpinned(&job(0, 1, &[0b1, 0b10])).contains("(the job allows A100|L4;"));
    assert!(unpinned(&job(0, 1, &[0b1, 0])).contains("(the job allows any model)"));
    assert_eq!(
        unpinned(&job(0, 1, &[0b100])),
        format!("{head} (the job asks for H100, which is not one of them)")
    );
    assert_eq!(
        unpinned(&job(0, 1, &[1 << 63])),
        format!("{head} (the job asks for a model the cluster does not have)")
    );
    assert_eq!(job_charge(&q, &c, &job(0, 0, &[0])), Charge::Free);
    let solo = q.totals_account(q.index("solo").unwrap()).unwrap();
    assert_eq!(job_charge(&q, &c, &job(1, 1, &[0])), Charge::Account(solo));
    assert_eq!(job_charge(&q, &c, &job(2, 1, &[0])), Charge::Unlisted);
}

#[test]
fn queue_use_is_read_per_model_for_flavored_queues() {
    let q = two_teams();
    let mut c = ctx();
    c.queues = vec![
        QueueStatus {
            queue: 0,
            gpu_milli_used: 15 * G,
            gpu_milli_used_by_model: vec![12 * G, 2 * G, G],
            ..Default::default()
        },
        QueueStatus {
            queue: 1,
            gpu_milli_used: 2 * G,
            // A host that does not split use by model: totals are enough for solo.
            ..Default::default()
        },
    ];
    let l = ledger_from_cycle(&q, &c);
    assert_eq!(l.used(flavor(&q, "team-a", "A100")), 12 * G);
    assert_eq!(
        l.used(flavor(&q, "team-a", "L4")),
        2 * G,
        "H100 is not a flavor"
    );
    let solo = q.totals_account(q.index("solo").unwrap()).unwrap();
    assert_eq!(l.used(solo), 2 * G);
    // A shorter per-model list counts the missing models as 0.
    let mut l = Ledger::new(&q);
    let short = QueueStatus {
        queue: 0,
        gpu_milli_used: 3 * G,
        gpu_milli_used_by_model: vec![3 * G],
        ..Default::default()
    };
    add_queue_status(&mut l, &c, &short);
    assert_eq!(l.used(flavor(&q, "team-a", "A100")), 3 * G);
    assert_eq!(l.used(flavor(&q, "team-a", "L4")), 0);
}

#[test]
fn flavor_config_errors_name_the_key() {
    let e = |json: &str| quotas(json).unwrap_err().to_string();
    assert_eq!(
        e(r#"{"a": {"nominal_gpus": 4, "flavors": {"A100": {"nominal_gpus": 4}}}}"#),
        "invalid config: queues.a: `nominal_gpus` and `flavors` given; a queue has either \
         queue totals (`nominal_gpus`, `borrowing_limit_gpus`, `lending_limit_gpus`) or quotas \
         per GPU model (`flavors`, each with its own `nominal_gpus` and limits), not both"
    );
    assert!(
        e(r#"{"a": {"cohort": "x", "borrowing_limit_gpus": 1, "flavors": {"A100": {"nominal_gpus": 4}}}}"#)
            .starts_with("invalid config: queues.a: `borrowing_limit_gpus` and `flavors` given")
    );
    assert_eq!(
        e(r#"{"a": {"flavors": {}}}"#),
        "invalid config: queues.a.flavors: no flavor given; name at least one GPU model, \
         e.g. {\"A100\": {\"nominal_gpus\": 8}}"
    );
    assert!(
        e(r#"{"a": {"flavors": {"A100": {"nominal_gpus": 4, "cohort": "x"}}}}"#)
            .starts_with("invalid config: queues.a.flavors.A100: unknown field `cohort`")
    );
    assert!(
        e(r#"{"a": {"flavors": {"A100": {}}}}"#)
            .starts_with("invalid config: queues.a.flavors.A100: missing field `nominal_gpus`")
    );
    assert_eq!(
        e(r#"{"a": {"flavors": {"L4": {"nominal_gpus": -2}}}}"#),
        "invalid config: queues.a.flavors.L4.nominal_gpus: must be a number of GPUs from 0 to \
         1000000000, got -2"
    );
    assert!(
        e(r#"{"a": {"flavors": {"L4": {"nominal_gpus": 2, "borrowing_limit_gpus": 1}}}}"#)
            .starts_with(
                "invalid config: queues.a.flavors.L4.borrowing_limit_gpus: a queue without a cohort"
            )
    );
    assert_eq!(
        e(
            r#"{"a": {"cohort": "x", "flavors": {"L4": {"nominal_gpus": 2, "lending_limit_gpus": 3}}}}"#
        ),
        "invalid config: queues.a.flavors.L4.lending_limit_gpus: lending limit 3 exceeds the \
         nominal quota 2"
    );
    assert_eq!(
        e(r#"{"a": {"flavors": {"": {"nominal_gpus": 2}}}}"#),
        "invalid config: queues.a.flavors.\"\": name is empty"
    );
    assert_eq!(
        e(r#"{"a": {"nominal_gpus": 4, "cohort": "x"},
              "b": {"cohort": "x", "flavors": {"A100": {"nominal_gpus": 4}}}}"#),
        "invalid config: queues.b: cohort x mixes queue totals (queue a) and quotas per GPU \
         model (queue b); queues of one cohort lend to each other only if all use \
         `nominal_gpus` or all use `flavors`"
    );
    // Different flavor sets in one cohort are fine; a flavor only one queue has has
    // no peers.
    let q = quotas(
        r#"{"a": {"cohort": "x", "flavors": {"A100": {"nominal_gpus": 4}}},
            "b": {"cohort": "x", "flavors": {"A100": {"nominal_gpus": 4}, "L4": {"nominal_gpus": 2}}}}"#,
    )
    .unwrap();
    let bl = flavor(&q, "b", "L4");
    assert_eq!(q.cohort_peers(bl).count(), 0);
    assert_eq!(q.max_ever_milli(bl), 2 * G);
}
