//! Unit tests of the quota arithmetic, the messages and config errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::message::{describe, never_fits, peer_first};
use crate::{ConfigError, Ledger, Outcome, Quotas};
use std::collections::BTreeMap;

fn quotas(json: &str) -> Result<Quotas, ConfigError> {
    let map: BTreeMap<String, serde_json::Value> = serde_json::from_str(json).unwrap();
    Quotas::from_map(&map)
}

/// team-a and team-b: 16 nominal each, borrowing limit 8, cohort lab.
fn kueue_example() -> Quotas {
    quotas(
        r#"{"team-a": {"nominal_gpus": 16, "borrowing_limit_gpus": 8, "cohort": "lab"},
            "team-b": {"nominal_gpus": 16, "borrowing_limit_gpus": 8, "cohort": "lab"}}"#,
    )
    .unwrap()
}

const G: u64 = 1000;

/// The account of a queue with totals.
fn acct(q: &Quotas, name: &str) -> usize {
    q.totals_account(q.index(name).unwrap()).unwrap()
}

#[test]
fn within_nominal_up_to_exactly_nominal() {
    let q = kueue_example();
    let a = acct(&q, "team-a");
    let mut l = Ledger::new(&q);
    l.add(a, 14 * G);
    assert_eq!(l.assess(a, 2 * G).outcome, Outcome::WithinNominal);
    assert_eq!(
        l.assess(a, 3 * G).outcome,
        Outcome::Borrows { borrow_after: G }
    );
}

#[test]
fn borrowing_stops_at_the_limit_with_a_message_naming_it() {
    let q = kueue_example();
    let a = acct(&q, "team-a");
    let mut l = Ledger::new(&q);
    l.add(a, 22 * G);
    assert_eq!(
        l.assess(a, 2 * G).outcome,
        Outcome::Borrows {
            borrow_after: 8 * G
        }
    );
    l.add(a, 2 * G);
    let x = l.assess(a, 2 * G);
    assert_eq!(
        x.outcome,
        Outcome::OverBorrowingLimit {
            borrow_after: 10 * G
        }
    );
    assert_eq!(
        describe(&q, &x),
        "queue team-a: 16 of 16 GPUs nominal in use, borrowing 8 of limit 8 from cohort lab; \
         job needs 2, which would make it borrow 10"
    );
}

#[test]
fn the_cohort_lends_only_the_peers_unused_nominal() {
    let q = kueue_example();
    let (a, b) = (acct(&q, "team-a"), acct(&q, "team-b"));
    let mut l = Ledger::new(&q);
    l.add(a, 16 * G);
    l.add(b, 13 * G);
    assert_eq!(l.cohort_free(a), 3 * G);
    let x = l.assess(a, 4 * G);
    assert_eq!(x.outcome, Outcome::CohortShort { extra: 4 * G });
    assert!(describe(&q, &x).contains("cohort lab can lend 3 more; job needs 4"));
    assert_eq!(
        l.assess(a, 3 * G).outcome,
        Outcome::Borrows {
            borrow_after: 3 * G
        }
    );
}

#[test]
fn a_loan_is_taken_from_what_peers_can_lend_whoever_borrows_it() {
    // Three queues of 10; c borrows 5 (from a's or b's unused quota).
    let q = quotas(
        r#"{"a": {"nominal_gpus": 10, "cohort": "x"}, "b": {"nominal_gpus": 10, "cohort": "x"},
            "c": {"nominal_gpus": 10, "cohort": "x"}}"#,
    )
    .unwrap();
    let (a, b, c) = (acct(&q, "a"), acct(&q, "b"), acct(&q, "c"));
    let mut l = Ledger::new(&q);
    l.add(a, 10 * G);
    l.add(c, 15 * G);
    assert_eq!(l.cohort_free(a), 5 * G, "b lends 10, 5 of it is c's loan");
    // a uses 5 and wants 6: it would borrow 1, but a's unused 5 is c's loan already.
    let mut l = Ledger::new(&q);
    l.add(a, 5 * G);
    l.add(b, 10 * G);
    l.add(c, 15 * G);
    assert_eq!(
        l.assess(a, 6 * G).outcome,
        Outcome::CohortShort { extra: G }
    );
    // c (already borrowing 5) borrows more only from what is left after its own loan.
    let mut l = Ledger::new(&q);
    l.add(b, 5 * G);
    l.add(c, 15 * G);
    assert_eq!(l.cohort_free(c), 10 * G);
}

#[test]
fn lending_limit_keeps_part_of_the_nominal_quota_for_its_queue() {
    let q = quotas(
        r#"{"a": {"nominal_gpus": 8, "cohort": "x"},
            "b": {"nominal_gpus": 16, "lending_limit_gpus": 4, "cohort": "x"}}"#,
    )
    .unwrap();
    let (a, b) = (acct(&q, "a"), acct(&q, "b"));
    let mut l = Ledger::new(&q);
    l.add(a, 8 * G);
    assert_eq!(l.cohort_free(a), 4 * G);
    l.add(b, 14 * G);
    assert_eq!(l.cohort_free(a), 2 * G, "min(unused 2, lending limit 4)");
    assert_eq!(q.max_ever_milli(a), 12 * G);
}

#[test]
fn no_cohort_means_nominal_only_and_fractions_are_milli() {
    let q = quotas(r#"{"solo": {"nominal_gpus": 2.5}}"#).unwrap();
    let s = acct(&q, "solo");
    let mut l = Ledger::new(&q);
    l.add(s, 2000);
    assert_eq!(l.assess(s, 500).outcome, Outcome::WithinNominal);
    let x = l.assess(s, 600);
    assert_eq!(x.outcome, Outcome::NoCohort);
    assert_eq!(
        describe(&q, &x),
        "queue solo: 2 of 2.5 GPUs nominal in use; no cohort to borrow from; job needs 0.6"
    );
    assert_eq!(q.max_ever_milli(s), 2500);
}

#[test]
fn reservations_show_in_messages_and_peer_first_names_the_peer() {
    let q = kueue_example();
    let (a, b) = (acct(&q, "team-a"), acct(&q, "team-b"));
    let mut l = Ledger::new(&q);
    l.add(a, 16 * G);
    l.add(b, 8 * G);
    l.reserve(b, 3 * G);
    let x = l.assess(a, G);
    assert_eq!(
        peer_first(&l, &x, b, 3),
        "queue team-a: 16 of 16 GPUs nominal in use, borrowing 0 of limit 8 from cohort lab; \
         job needs 1 and would borrow, but queue team-b of cohort lab is below its nominal quota \
         (8 of 16 GPUs in use) with 3 pending jobs (3 GPUs) that fit it; queues below nominal \
         are served before borrowers"
    );
    let y = l.assess(b, 6 * G);
    assert!(describe(&q, &y).starts_with(
        "queue team-b: 11 of 16 GPUs nominal in use, borrowing 0 of limit 8 from cohort lab \
         (counting 3 GPUs of jobs admitted this cycle); cohort lab can lend 0 more"
    ));
}

#[test]
fn never_fits_names_nominal_and_limit() {
    let q = kueue_example();
    let a = acct(&q, "team-a");
    assert_eq!(q.max_ever_milli(a), 24 * G);
    assert_eq!(
        never_fits(&q, a, 30 * G),
        "job needs 30 GPUs but queue team-a can never hold more than 24 \
         (16 nominal + borrowing limit 8 in cohort lab)"
    );
    let q = quotas(
        r#"{"a": {"nominal_gpus": 4, "cohort": "x"}, "b": {"nominal_gpus": 2, "cohort": "x"}}"#,
    )
    .unwrap();
    assert_eq!(
        never_fits(&q, acct(&q, "a"), 7 * G),
        "job needs 7 GPUs but queue a can never hold more than 6 \
         (4 nominal + 2 the other queues of cohort x can lend)"
    );
}

#[test]
fn config_errors_name_the_key() {
    let e = |json: &str| quotas(json).unwrap_err().to_string();
    assert!(
        e(r#"{"a": {"nominal": 1}}"#)
            .starts_with("invalid config: queues.a: unknown field `nominal`")
    );
    assert_eq!(
        e(r#"{"a": {"cohort": "x"}}"#),
        "invalid config: queues.a: missing field `nominal_gpus` (or `flavors` for quotas per GPU model)"
    );
    assert_eq!(
        e(r#"{"a": {"nominal_gpus": -1}}"#),
        "invalid config: queues.a.nominal_gpus: must be a number of GPUs from 0 to 1000000000, got -1"
    );
    assert!(
        e(r#"{"a": {"nominal_gpus": 1, "borrowing_limit_gpus": 1}}"#)
            .starts_with("invalid config: queues.a.borrowing_limit_gpus: a queue without a cohort")
    );
    assert_eq!(
        e(r#"{"a": {"nominal_gpus": 4, "lending_limit_gpus": 5, "cohort": "x"}}"#),
        "invalid config: queues.a.lending_limit_gpus: lending limit 5 exceeds the nominal quota 4"
    );
    assert_eq!(
        e(r#"{"a": {"nominal_gpus": 4, "cohort": ""}}"#),
        "invalid config: queues.a.cohort: name is empty"
    );
    assert!(quotas(r#"{"a": {"nominal_gpus": 4, "borrowing_limit_gpus": null, "lending_limit_gpus": null}}"#).is_ok());
}
