//! One conformance suite for both history databases: every check runs on a store with
//! history in SQLite (beside sled) and on one with history in a real PostgreSQL server
//! started for the test (`gantry_store::test_postgres`). A machine without PostgreSQL's
//! server fails the PostgreSQL run, saying what to install.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_api::accounting::AccountingRecord;
use gantry_api::model::{ArrayMember, JobRecord, JobSpec, JobState};
use gantry_api::task::TaskExit;
use gantry_store::test_postgres::TestPostgres;
use gantry_store::{AccountingFilter, HistoryBackend, JobIndex, StateBackend, Store};

/// A store and what keeps it alive; `reopen` opens the same history again over a new sled.
struct Subject {
    store: Store,
    dirs: Vec<tempfile::TempDir>,
    backend: HistoryBackend,
    reopens_same_dir: bool,
}

impl Subject {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        Self {
            store,
            dirs: vec![dir],
            backend: HistoryBackend::Sqlite,
            reopens_same_dir: true,
        }
    }

    fn postgres(server: &TestPostgres, db: &str) -> Self {
        let backend = HistoryBackend::Postgres {
            url: server.database(db).unwrap(),
        };
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), 4, &StateBackend::Sled, &backend).unwrap();
        Self {
            store,
            dirs: vec![dir],
            backend,
            reopens_same_dir: false,
        }
    }

    /// The store opened again: SQLite from the same directory; PostgreSQL from a new data
    /// directory (another controller) on the same database.
    fn reopen(&mut self) {
        let dir = if self.reopens_same_dir {
            self.store = Store::temporary().unwrap();
            self.dirs.last().unwrap().path().to_path_buf()
        } else {
            self.dirs.push(tempfile::tempdir().unwrap());
            self.dirs.last().unwrap().path().to_path_buf()
        };
        self.store = Store::open_with(&dir, 4, &StateBackend::Sled, &self.backend).unwrap();
    }
}

fn ended(id: u64, user: &str, end_ms: u64) -> JobRecord {
    let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    spec.user = user.into();
    spec.account = format!("{user}-lab");
    let mut j = JobRecord::new(id, spec, id);
    j.state = JobState::Succeeded;
    j.end_ms = Some(end_ms);
    j
}

fn record(job_id: u64, task_index: u32, user: &str, end_ms: u64) -> AccountingRecord {
    AccountingRecord {
        job_id,
        task_index,
        run: 0,
        job_name: format!("job-{job_id}"),
        user: user.into(),
        account: format!("{user}-lab"),
        queue: "default".into(),
        node: "n0".into(),
        gpus: vec![],
        cpu_milli: 1000,
        memory_mib: 64,
        start_ms: end_ms - 2000,
        end_ms,
        gpu_milli_seconds: 1000,
        cpu_seconds: 0.5,
        memory_peak_mib: 3,
        exit: TaskExit::Exited(0),
        oom_killed: false,
        uncharged: None,
        gpu_used_milli_seconds: None,
    }
}

fn events_are_kept_in_order_by_job_and_by_kind(s: &mut Subject) {
    let st = &s.store;
    st.event(10, Some(1), "submitted", "job 1".into()).unwrap();
    st.event(11, None, "service", "service 4: scaled to 2".into())
        .unwrap();
    st.event(12, Some(2), "submitted", "job 2".into()).unwrap();
    st.event(13, Some(1), "finished", "job 1 done".into())
        .unwrap();
    st.event(14, None, "service", "service 41: other".into())
        .unwrap();
    let all = st.events(None, 10).unwrap();
    assert_eq!(all.len(), 5);
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq), "oldest first");
    assert_eq!(st.events(None, 2).unwrap()[0].at_ms, 13, "the last two");
    let one: Vec<_> = st.events(Some(1), 10).unwrap();
    assert_eq!(
        one.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        ["submitted", "finished"]
    );
    let svc = st.kind_events("service", "service 4: ", 10).unwrap();
    assert_eq!(svc.len(), 1, "the prefix is exact: {svc:?}");
    assert_eq!(svc[0].message, "service 4: scaled to 2");
    st.delete_job_history(1).unwrap();
    assert!(st.events(Some(1), 10).unwrap().is_empty());
    assert_eq!(st.delete_events_before(13, 100).unwrap(), 2, "stops at 13");
    assert_eq!(st.events(None, 10).unwrap()[0].at_ms, 14);
    st.event(15, None, "k", "later".into()).unwrap();
    let seqs: Vec<u64> = st.events(None, 10).unwrap().iter().map(|e| e.seq).collect();
    assert!(
        seqs[0] < seqs[1],
        "numbers keep growing after deletes: {seqs:?}"
    );
}

fn hostile_text_round_trips(s: &mut Subject) {
    let st = &s.store;
    let text = "quote ' \" back\\slash ; DROP TABLE events; -- ünïcødé 🚀 %_ \u{7f}";
    st.event(1, Some(9), text, text.into()).unwrap();
    let e = &st.events(Some(9), 1).unwrap()[0];
    assert_eq!((e.kind.as_str(), e.message.as_str()), (text, text));
    // A NUL is refused by PostgreSQL's text: it is stored, never an error.
    st.event(2, Some(9), "k", "nul\0here".into()).unwrap();
    let e = &st.events(Some(9), 1).unwrap()[0];
    assert!(e.message.starts_with("nul") && e.message.ends_with("here"));
    let mut j = ended(77, "o'brien\"; --", 5);
    j.spec.queue = "q%_".into();
    s.store.archive_job(&j).unwrap();
    let under_user: Vec<u64> = s
        .store
        .ids_newest_first(Some((JobIndex::User, "o'brien\"; --")), None)
        .collect();
    assert_eq!(under_user, [77]);
    let under_queue: Vec<u64> = s
        .store
        .ids_newest_first(Some((JobIndex::Queue, "q%")), None)
        .collect();
    assert!(under_queue.is_empty(), "no pattern matching in an index");
}

fn decisions_are_kept_replaced_and_deleted(s: &mut Subject) {
    let st = &s.store;
    assert_eq!(st.job_decisions(5).unwrap(), None);
    st.put_job_decisions(5, &serde_json::json!([{"why": "first"}]))
        .unwrap();
    st.put_job_decisions(5, &serde_json::json!([{"why": "second"}]))
        .unwrap();
    assert_eq!(
        st.job_decisions(5).unwrap(),
        Some(serde_json::json!([{"why": "second"}]))
    );
    st.delete_job_history(5).unwrap();
    assert_eq!(st.job_decisions(5).unwrap(), None);
}

fn archived_jobs_are_found_by_every_read(s: &mut Subject) {
    let st = &s.store;
    let mut member = ended(1, "ann", 100);
    member.array = Some(ArrayMember {
        array_id: 1,
        index: 0,
        max_running: None,
        count: 0,
        min: 0,
        max: 0,
    });
    for j in [&member, &ended(2, "bob", 200), &ended(3, "ann", 300)] {
        st.put_job(j).unwrap();
    }
    st.archive_job(&member).unwrap();
    st.archive_job(&ended(3, "ann", 300)).unwrap();
    assert_eq!(st.job(1).unwrap().unwrap(), member);
    assert!(st.has_job(3).unwrap());
    assert_eq!(st.job_count().unwrap(), 3);
    let newest: Vec<u64> = st.ids_newest_first(None, None).collect();
    assert_eq!(newest, [3, 2, 1]);
    let ann: Vec<u64> = st
        .ids_newest_first(Some((JobIndex::User, "ann")), None)
        .collect();
    assert_eq!(ann, [3, 1]);
    let below: Vec<u64> = st
        .ids_newest_first(Some((JobIndex::Account, "ann-lab")), Some(3))
        .collect();
    assert_eq!(below, [1]);
    let state: Vec<u64> = st
        .ids_newest_first(Some((JobIndex::State, "succeeded")), None)
        .collect();
    assert_eq!(state, [3, 2, 1]);
    assert_eq!(st.ended_before(250, 10).unwrap(), [(100, 1), (200, 2)]);
    assert_eq!(
        st.ended_between((100, 1), 1000, 10).unwrap(),
        [(200, 2), (300, 3)]
    );
    assert_eq!(st.array_member_ids(1).unwrap(), [1]);
    // Archiving again replaces (a crash between the two writes repeats the move).
    let mut again = ended(3, "ann", 300);
    again.exit_code = Some(4);
    st.archive_job(&again).unwrap();
    assert_eq!(st.job(3).unwrap().unwrap().exit_code, Some(4));
    st.delete_job(3).unwrap();
    assert!(!st.has_job(3).unwrap());
    // More than one read's worth of archived ids is walked to the end.
    let many: Vec<JobRecord> = (1000..2300).map(|id| ended(id, "cat", id)).collect();
    st.archive_jobs(&many.iter().collect::<Vec<_>>()).unwrap();
    let cat: Vec<u64> = st
        .ids_newest_first(Some((JobIndex::User, "cat")), None)
        .collect();
    assert_eq!(cat.len(), 1300);
    assert_eq!((cat[0], cat[1299]), (2299, 1000));
}

fn accounting_is_written_once_and_filtered(s: &mut Subject) {
    let st = &s.store;
    let a = st
        .put_accounting_seq(&record(1, 0, "alice", 9_000))
        .unwrap();
    let b = st.put_accounting_seq(&record(2, 0, "bob", 5_000)).unwrap();
    assert!(a.unwrap() < b.unwrap(), "numbered in write order");
    assert_eq!(
        st.put_accounting_seq(&record(1, 0, "alice", 9_000))
            .unwrap(),
        None,
        "a replay is refused"
    );
    assert!(st.put_accounting(&record(1, 1, "alice", 12_000)).unwrap());
    let ends = |f: AccountingFilter| -> Vec<u64> {
        st.accounting(&f)
            .unwrap()
            .iter()
            .map(|r| r.end_ms)
            .collect()
    };
    assert_eq!(ends(AccountingFilter::default()), [5_000, 9_000, 12_000]);
    let alice = AccountingFilter {
        user: Some("alice".into()),
        ..Default::default()
    };
    assert_eq!(ends(alice), [9_000, 12_000]);
    let lab = AccountingFilter {
        account: Some("bob-lab".into()),
        ..Default::default()
    };
    assert_eq!(ends(lab), [5_000]);
    let window = AccountingFilter {
        job: Some(1),
        since_ms: Some(10_000),
        until_ms: Some(13_000),
        ..Default::default()
    };
    assert_eq!(ends(window), [12_000]);
    let mut seen = Vec::new();
    let n = st
        .each_accounting_since(a, |seq, r| seen.push((seq, r.job_id)))
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(seen[0], (b.unwrap(), 2));
    assert_eq!(
        st.delete_accounting_before(10_000, 1).unwrap(),
        1,
        "bounded"
    );
    assert_eq!(st.delete_accounting_before(10_000, 10).unwrap(), 1);
    assert_eq!(ends(AccountingFilter::default()), [12_000]);
}

fn history_outlives_the_process_that_wrote_it(s: &mut Subject) {
    s.store.event(1, Some(3), "k", "kept".into()).unwrap();
    s.store.put_accounting(&record(3, 0, "dan", 4_000)).unwrap();
    let j = ended(3, "dan", 4_000);
    s.store.put_job(&j).unwrap();
    s.store.archive_job(&j).unwrap();
    s.store.flush().unwrap();
    s.reopen();
    assert_eq!(s.store.events(Some(3), 5).unwrap()[0].message, "kept");
    assert_eq!(s.store.job(3).unwrap().unwrap(), j);
    assert_eq!(
        s.store
            .accounting(&AccountingFilter::default())
            .unwrap()
            .len(),
        1
    );
    // The reopened store numbers on.
    s.store.event(2, None, "k", "next".into()).unwrap();
    let seqs: Vec<u64> = s
        .store
        .events(None, 5)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert!(seqs[0] < seqs[1]);
}

/// One check of the suite, by name.
type Check = (&'static str, fn(&mut Subject));

const CHECKS: [Check; 6] = [
    ("events", events_are_kept_in_order_by_job_and_by_kind),
    ("hostile text", hostile_text_round_trips),
    ("decisions", decisions_are_kept_replaced_and_deleted),
    ("archive", archived_jobs_are_found_by_every_read),
    ("accounting", accounting_is_written_once_and_filtered),
    ("reopen", history_outlives_the_process_that_wrote_it),
];

#[test]
fn sqlite_history_passes_the_conformance_suite() {
    for (name, check) in CHECKS {
        eprintln!("sqlite: {name}");
        check(&mut Subject::sqlite());
    }
}

#[test]
fn postgres_history_passes_the_conformance_suite() {
    let server = TestPostgres::start().unwrap();
    for (i, (name, check)) in CHECKS.into_iter().enumerate() {
        eprintln!("postgres: {name}");
        check(&mut Subject::postgres(&server, &format!("conformance_{i}")));
    }
}

#[test]
fn postgres_going_away_is_an_error_naming_it_and_its_return_is_picked_up() {
    let mut server = TestPostgres::start().unwrap();
    let s = Subject::postgres(&server, "outage");
    s.store.event(1, None, "k", "before".into()).unwrap();
    server.kill();
    let err = s
        .store
        .event(2, None, "k", "during".into())
        .expect_err("the server is gone")
        .to_string();
    assert!(
        err.contains(&format!("postgres at 127.0.0.1:{}/outage", server.port())),
        "{err}"
    );
    assert!(
        !err.contains("gantry@"),
        "no credentials in messages: {err}"
    );
    server.run().unwrap();
    s.store.event(3, None, "k", "after".into()).unwrap();
    let messages: Vec<String> = s
        .store
        .events(None, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.message)
        .collect();
    assert_eq!(messages, ["before", "after"]);
}

#[test]
fn an_unreachable_or_malformed_postgres_url_fails_the_open_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let err = Store::open_with(
        dir.path(),
        4,
        &StateBackend::Sled,
        &HistoryBackend::Postgres {
            url: format!("postgres://gantry:secret@127.0.0.1:{port}/gantry"),
        },
    )
    .expect_err("nothing listens")
    .to_string();
    assert!(err.contains(&format!("127.0.0.1:{port}/gantry")), "{err}");
    assert!(!err.contains("secret"), "{err}");
    let err = Store::open_with(
        dir.path(),
        4,
        &StateBackend::Sled,
        &HistoryBackend::Postgres {
            url: "postgres://[::1".into(),
        },
    )
    .expect_err("malformed")
    .to_string();
    assert!(err.contains("history.url"), "{err}");
}
