//! Unit tests of the fair-share factor (classic and Fair Tree) on hand-computed values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::config::Config;
use crate::fairshare::{FairShare, classic_factor, level_fs};
use gantry_sdk::{Cycle, Usage};
use proptest::prelude::*;

/// A cycle whose string table holds every name, with the given decayed usage.
fn ctx(accounts: &[(&str, f64)], users: &[(&str, f64)]) -> Cycle {
    let mut c = Cycle::default();
    let mut usage = |list: &[(&str, f64)]| -> Vec<Usage> {
        list.iter()
            .map(|&(name, gpu_seconds)| {
                c.strings.push(name.to_string());
                Usage {
                    who: (c.strings.len() - 1) as u32,
                    gpu_seconds,
                }
            })
            .collect()
    };
    let a = usage(accounts);
    let u = usage(users);
    c.account_usage = a;
    c.user_usage = u;
    c
}

fn config(json: &str) -> Config {
    Config::parse(json).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn factor_formulas() {
    assert_eq!(classic_factor(0.0, 0.5), 1.0);
    assert_eq!(classic_factor(1.0, 0.5), 0.25);
    assert_eq!(classic_factor(0.5, 0.5), 0.5);
    assert_eq!(classic_factor(0.3, 0.0), 0.0);
    assert_eq!(level_fs(0.5, 0.25), 2.0);
    assert_eq!(level_fs(0.5, 0.0), f64::INFINITY);
    assert_eq!(level_fs(0.0, 0.0), 0.0);
}

#[test]
fn classic_equal_shares_heavy_account_gets_a_quarter() {
    let cfg = config(r#"{"accounts": {"vision": {}, "nlp": {}}}"#);
    let c = ctx(&[("vision", 144_000.0)], &[("ann", 144_000.0)]);
    let fs = FairShare::new(&cfg, &c);
    let v = fs.of("vision", "ann");
    // U = 1 (all usage), S = 0.5: 2^(-2).
    assert_eq!(v.factor, 0.25);
    assert_eq!(
        v.why,
        "account vision used 40.0 GPU-h = 100% of usage, share 50%"
    );
    let n = fs.of("nlp", "bob");
    assert_eq!(n.factor, 1.0);
    assert_eq!(n.why, "account nlp used 0.0 GPU-h = 0% of usage, share 50%");
}

#[test]
fn classic_unequal_shares_count_all_usage_including_unconfigured_accounts() {
    let cfg = config(r#"{"accounts": {"a": {"shares": 3}, "b": {"shares": 1}}}"#);
    // Total usage 1000 (c has no shares but its usage counts in the whole).
    let c = ctx(&[("a", 600.0), ("b", 100.0), ("c", 300.0)], &[]);
    let fs = FairShare::new(&cfg, &c);
    // a: U 0.6, S 0.75 -> 2^-0.8; b: U 0.1, S 0.25 -> 2^-0.4.
    assert!(close(fs.of("a", "x").factor, 0.574_349_177_498_517_5));
    assert!(close(fs.of("b", "x").factor, 0.757_858_283_255_199_1));
    let none = fs.of("c", "x");
    assert_eq!(none.factor, 0.0);
    assert_eq!(none.why, "account c has no shares configured");
}

#[test]
fn classic_users_inside_an_account() {
    let cfg = config(
        r#"{"accounts": {"vision": {"shares": 1, "users": {"ann": 1, "bob": 3}}, "nlp": {"shares": 1}}}"#,
    );
    let c = ctx(
        &[("vision", 500.0), ("nlp", 500.0)],
        &[("ann", 250.0), ("bob", 250.0), ("cat", 500.0)],
    );
    let fs = FairShare::new(&cfg, &c);
    // ann: S = 0.5 × 1/4 = 0.125, U = 0.25 -> 2^-2.
    let ann = fs.of("vision", "ann");
    assert_eq!(ann.factor, 0.25);
    assert!(
        ann.why
            .contains("user ann of account vision used 0.1 GPU-h = 25% of usage, share 12%")
    );
    // bob: S = 0.5 × 3/4 = 0.375, U = 0.25 -> 2^(-2/3).
    assert!(close(
        fs.of("vision", "bob").factor,
        0.629_960_524_947_436_6
    ));
    // A user without shares in an account that lists users gets nothing.
    let dan = fs.of("vision", "dan");
    assert_eq!(dan.factor, 0.0);
    assert_eq!(dan.why, "user dan has no shares in account vision");
    // nlp lists no users: any user is charged as the account (U 0.5, S 0.5).
    assert_eq!(fs.of("nlp", "cat").factor, 0.5);
}

#[test]
fn no_usage_at_all_gives_everyone_with_shares_one() {
    let cfg = config(r#"{"accounts": {"a": {}, "b": {"shares": 0}}}"#);
    let empty = Cycle::default();
    let fs = FairShare::new(&cfg, &empty);
    assert_eq!(fs.of("a", "u").factor, 1.0);
    assert_eq!(fs.of("b", "u").factor, 0.0);
}

#[test]
fn fair_tree_ranks_accounts_then_users() {
    let cfg = config(
        r#"{"fair_tree": true, "accounts": {"a": {}, "b": {}, "c": {"shares": 2, "users": {"x": 1, "y": 1}}}}"#,
    );
    let c = ctx(&[("a", 100.0), ("c", 100.0)], &[("x", 100.0), ("z", 100.0)]);
    let fs = FairShare::new(&cfg, &c);
    // Accounts: S a .25 b .25 c .5; U a .5 b 0 c .5 -> LFS a .5, b inf, c 1: b, c, a.
    // Inside c: x used everything (LFS .5), y nothing (inf): y before x.
    // Four leaves: b 4, c.y 3, c.x 2, a 1.
    assert_eq!(fs.of("b", "anyone").factor, 1.0);
    assert_eq!(fs.of("c", "y").factor, 0.75);
    assert_eq!(fs.of("c", "x").factor, 0.5);
    assert_eq!(fs.of("a", "z").factor, 0.25);
    assert_eq!(
        fs.of("c", "x").why,
        "fair tree rank 2 of 4: account c level fair-share 1.00 (share 50%, used 0.0 GPU-h), user x level fair-share 0.50 (used 0.0 GPU-h)"
    );
    assert!(
        fs.of("b", "q")
            .why
            .contains("level fair-share inf (no usage)")
    );
    assert_eq!(fs.of("c", "w").factor, 0.0);
    assert_eq!(fs.of("d", "w").factor, 0.0);
}

#[test]
fn fair_tree_ties_share_a_rank_and_tied_accounts_merge_their_children() {
    // a and d tie (equal shares and usage): their leaves are ranked together, so a's
    // implicit leaf (LFS 1) lands between d's users u2 (inf) and u1 (.5).
    let cfg =
        config(r#"{"fair_tree": true, "accounts": {"a": {}, "d": {"users": {"u1": 1, "u2": 1}}}}"#);
    let c = ctx(&[("a", 100.0), ("d", 100.0)], &[("u1", 100.0)]);
    let fs = FairShare::new(&cfg, &c);
    assert_eq!(fs.of("d", "u2").factor, 1.0);
    assert!(close(fs.of("a", "v").factor, 2.0 / 3.0));
    assert!(close(fs.of("d", "u1").factor, 1.0 / 3.0));

    // Equal level fair-share at the leaves: same rank.
    let cfg = config(
        r#"{"fair_tree": true, "accounts": {"a": {}, "b": {}, "c": {"users": {"p": 1, "q": 1}}}}"#,
    );
    let c = ctx(&[("a", 100.0), ("b", 100.0)], &[]);
    let fs = FairShare::new(&cfg, &c);
    // c (no usage) first; p and q tie at rank 4; a and b tie at rank 2.
    assert_eq!(fs.of("c", "p").factor, 1.0);
    assert_eq!(fs.of("c", "q").factor, 1.0);
    assert_eq!(fs.of("a", "x").factor, 0.5);
    assert_eq!(fs.of("b", "x").factor, 0.5);
}

#[test]
fn fair_tree_user_without_shares_ranks_last_in_its_account() {
    let cfg = config(r#"{"fair_tree": true, "accounts": {"a": {"users": {"p": 1, "z": 0}}}}"#);
    let empty = Cycle::default();
    let fs = FairShare::new(&cfg, &empty);
    assert_eq!(fs.of("a", "p").factor, 1.0);
    assert_eq!(fs.of("a", "z").factor, 0.5);
}

proptest! {
    #[test]
    fn factors_stay_in_unit_interval(
        shares in proptest::collection::vec(0.0f64..10.0, 3),
        usage in proptest::collection::vec(0.0f64..1e9, 3),
        tree in any::<bool>(),
    ) {
        let cfg = config(&format!(
            r#"{{"fair_tree": {tree}, "accounts": {{"a": {{"shares": {}}}, "b": {{"shares": {}}}, "c": {{"shares": {}, "users": {{"u": 1, "v": 2}}}}}}}}"#,
            shares[0], shares[1], shares[2]
        ));
        let c = ctx(&[("a", usage[0]), ("b", usage[1]), ("c", usage[2])], &[("u", usage[2])]);
        let fs = FairShare::new(&cfg, &c);
        for (a, u) in [("a", "u"), ("b", "u"), ("c", "u"), ("c", "v"), ("e", "u")] {
            let f = fs.of(a, u).factor;
            prop_assert!((0.0..=1.0).contains(&f), "{a}/{u}: {f}");
        }
    }
}
