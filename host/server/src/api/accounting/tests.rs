//! Totals of the accounting report, time parsing, and who may read what.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::auth::Identity;
use gantry_api::model::GpuShareView;
use gantry_node::executor::TaskExit;

fn rec(job_id: u64, user: &str, account: &str, milli_s: u64, cpu_s: f64) -> AccountingRecord {
    AccountingRecord {
        job_id,
        task_index: 0,
        run: 0,
        job_name: String::new(),
        user: user.into(),
        account: account.into(),
        queue: "default".into(),
        node: "n0".into(),
        gpus: vec![GpuShareView {
            index: 0,
            milli: 1000,
        }],
        cpu_milli: 1000,
        memory_mib: 64,
        start_ms: 0,
        end_ms: job_id,
        gpu_milli_seconds: milli_s,
        cpu_seconds: cpu_s,
        memory_peak_mib: 0,
        exit: TaskExit::Exited(0),
        oom_killed: false,
        uncharged: None,
        gpu_used_milli_seconds: None,
    }
}

#[test]
fn totals_sum_per_user_and_account_and_count_distinct_jobs() {
    let records = vec![
        rec(1, "alice", "ml", 3_600_000, 1800.0),
        rec(1, "alice", "ml", 1_800_000, 0.0),
        rec(2, "alice", "vision", 900_000, 3600.0),
        rec(3, "bob", "ml", 7_200_000, 0.5),
    ];
    let r = report(records.clone(), 1000);
    assert!(!r.truncated);
    assert_eq!(r.records, records);
    assert_eq!(r.total.gpu_seconds, 13_500.0);
    assert_eq!(r.total.gpu_hours, 3.75);
    assert_eq!((r.total.records, r.total.jobs), (4, 3));
    let names: Vec<&str> = r.users.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["alice", "bob"]);
    let alice = &r.users[0];
    assert_eq!((alice.gpu_hours, alice.cpu_hours), (1.75, 1.5));
    assert_eq!((alice.records, alice.jobs), (3, 2));
    let ml = r.accounts.iter().find(|t| t.name == "ml").unwrap();
    assert_eq!((ml.gpu_hours, ml.records, ml.jobs), (3.5, 3, 2));
    let vision = r.accounts.iter().find(|t| t.name == "vision").unwrap();
    assert_eq!((vision.gpu_seconds, vision.cpu_seconds), (900.0, 3600.0));
}

#[test]
fn a_limit_keeps_the_newest_records_and_totals_still_cover_all() {
    let records: Vec<_> = (1..=5).map(|i| rec(i, "u", "a", 1000, 1.0)).collect();
    let r = report(records, 2);
    assert!(r.truncated);
    let ids: Vec<u64> = r.records.iter().map(|x| x.job_id).collect();
    assert_eq!(ids, [4, 5]);
    assert_eq!((r.total.records, r.total.gpu_seconds), (5, 5.0));
    let empty = report(Vec::new(), 10);
    assert_eq!((empty.total.records, empty.users.len()), (0, 0));
}

#[test]
fn times_parse_as_epoch_ms_or_rfc3339() {
    assert_eq!(parse_time_ms("1700000000123"), Ok(1_700_000_000_123));
    assert_eq!(parse_time_ms("1970-01-01T00:00:00Z"), Ok(0));
    assert_eq!(parse_time_ms("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000));
    assert_eq!(
        parse_time_ms("2023-11-14T22:13:20.5Z"),
        Ok(1_700_000_000_500)
    );
    assert_eq!(
        parse_time_ms("2023-11-15T00:13:20.123456+02:00"),
        Ok(1_700_000_000_123)
    );
    assert_eq!(
        parse_time_ms("2000-02-29t12:00:00-01:30"),
        Ok(951_825_600_000 + 5_400_000)
    );
    for bad in [
        "",
        "yesterday",
        "2023-13-01T00:00:00Z",
        "2023-11-14T22:13:20",
        "2023-11-14T22:13:20+0200",
        "2023-11-14 25:00:00Z",
        "1969-12-31T23:59:59Z",
        "99999999999999999999999",
    ] {
        assert!(parse_time_ms(bad).is_err(), "{bad} should be refused");
    }
}

fn token(user: &str, role: Role) -> Caller {
    Caller::Token(Identity {
        name: format!("{user}-token"),
        user: user.into(),
        accounts: vec!["ml".into()],
        role,
        local_uid: None,
    })
}

#[test]
fn a_user_token_reads_only_its_own_records() {
    let q = |user: Option<&str>| AccountingQuery {
        user: user.map(str::to_string),
        since: Some("1000".into()),
        ..Default::default()
    };
    let alice = token("alice", Role::User);
    let own = filter(q(None), &alice).unwrap();
    assert_eq!(
        (own.user.as_deref(), own.since_ms),
        (Some("alice"), Some(1000))
    );
    assert_eq!(
        filter(q(Some("alice")), &alice).unwrap().user.as_deref(),
        Some("alice")
    );
    let denied = filter(q(Some("bob")), &alice).unwrap_err();
    assert_eq!(
        (denied.status.as_u16(), denied.field.as_deref()),
        (403, Some("user"))
    );
    let olga = token("olga", Role::Operator);
    assert_eq!(filter(q(None), &olga).unwrap().user, None);
    assert_eq!(
        filter(q(Some("bob")), &olga).unwrap().user.as_deref(),
        Some("bob")
    );
    assert_eq!(
        filter(q(None), &Caller::Open(Role::Admin)).unwrap().user,
        None
    );
    // Without identity, only the anonymous jobs' accounting.
    assert_eq!(
        filter(q(None), &Caller::Open(Role::User))
            .unwrap()
            .user
            .as_deref(),
        Some(crate::auth::ANONYMOUS_USER)
    );
    assert!(filter(q(Some("bob")), &Caller::Open(Role::User)).is_err());
    let bad_time = AccountingQuery {
        until: Some("soon".into()),
        ..Default::default()
    };
    let e = filter(bad_time, &olga).unwrap_err();
    assert_eq!(
        (e.status.as_u16(), e.field.as_deref()),
        (400, Some("until"))
    );
}
