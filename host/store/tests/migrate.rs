//! `Store::copy_into` (`gantry store migrate`): a controller's sled state and SQLite
//! history copied into a real etcd and PostgreSQL started for the test, and read back there
//! as they were: jobs and their index, a plugin in parts, pipelines, counters that number
//! on, archived jobs, events, decisions and accounting with their sequence numbers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_api::accounting::AccountingRecord;
use gantry_api::model::{JobRecord, JobSpec, JobState};
use gantry_api::task::TaskExit;
use gantry_store::test_etcd::TestEtcd;
use gantry_store::test_postgres::TestPostgres;
use gantry_store::{AccountingFilter, HistoryBackend, JobIndex, StateBackend, Store};

fn job(id: u64, user: &str, state: JobState, end_ms: Option<u64>) -> JobRecord {
    let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    spec.user = user.into();
    let mut j = JobRecord::new(id, spec, id);
    j.state = state;
    j.end_ms = end_ms;
    j
}

fn record(job_id: u64) -> AccountingRecord {
    AccountingRecord {
        job_id,
        task_index: 0,
        run: 0,
        job_name: "j".into(),
        user: "ann".into(),
        account: "lab".into(),
        queue: "default".into(),
        node: "n0".into(),
        gpus: vec![],
        cpu_milli: 1000,
        memory_mib: 64,
        start_ms: 100,
        end_ms: 900 + job_id,
        gpu_milli_seconds: 0,
        cpu_seconds: 0.5,
        memory_peak_mib: 1,
        exit: TaskExit::Exited(0),
        oom_killed: false,
        uncharged: None,
        gpu_used_milli_seconds: None,
    }
}

#[test]
fn a_stopped_controllers_state_and_history_move_to_etcd_and_postgres_whole() {
    let dir = tempfile::tempdir().unwrap();
    let plugin: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
    {
        let from = Store::open(dir.path()).unwrap();
        for _ in 0..3 {
            from.next_id("jobs").unwrap();
        }
        from.put_job(&job(1, "ann", JobState::Pending, None))
            .unwrap();
        from.put_job(&job(2, "bob", JobState::Running, None))
            .unwrap();
        let old = job(3, "ann", JobState::Succeeded, Some(50));
        from.put_job(&old).unwrap();
        from.archive_job(&old).unwrap();
        from.put_plugin("big", &plugin).unwrap();
        from.put_pipeline(1, &"first").unwrap();
        from.put_pipeline(2, &"second").unwrap();
        from.set_meta("ledger_checkpoint", &vec![7u64]).unwrap();
        for (at, job) in [(10, Some(1)), (20, None), (30, Some(3))] {
            from.event(at, job, "k", format!("at {at}")).unwrap();
        }
        from.put_job_decisions(3, &serde_json::json!([{"why": "kept"}]))
            .unwrap();
        from.put_accounting(&record(3)).unwrap();
        from.put_accounting(&record(2)).unwrap();
        from.flush().unwrap();
    }
    let etcd = TestEtcd::start(1).unwrap();
    let pg = TestPostgres::start().unwrap();
    let history = HistoryBackend::Postgres {
        url: pg.database("moved").unwrap(),
    };
    let state = StateBackend::Etcd(etcd.config("/gantry/"));
    let elsewhere = tempfile::tempdir().unwrap();
    let to = Store::open_with(elsewhere.path(), 4, &state, &history).unwrap();
    let from = Store::open(dir.path()).unwrap();
    let report = from.copy_into(&to).unwrap();
    assert_eq!(
        (report.jobs, report.plugins, report.pipelines),
        (2, 1, 2),
        "{report:?}"
    );
    assert_eq!(
        (
            report.archived_jobs,
            report.events,
            report.decisions,
            report.accounting
        ),
        (1, 3, 1, 2),
        "{report:?}"
    );
    let again = from
        .copy_into(&to)
        .expect_err("a second copy would mix states");
    assert!(again.to_string().contains("refusing"), "{again}");
    drop(to);

    // Another controller opens the moved store.
    let other = tempfile::tempdir().unwrap();
    let to = Store::open_with(other.path(), 4, &state, &history).unwrap();
    let ids: Vec<u64> = to.ids_newest_first(None, None).collect();
    assert_eq!(ids, [3, 2, 1]);
    let ann: Vec<u64> = to
        .ids_newest_first(Some((JobIndex::User, "ann")), None)
        .collect();
    assert_eq!(ann, [3, 1], "the index was built on the target");
    assert_eq!(to.job(3).unwrap().unwrap().state, JobState::Succeeded);
    assert_eq!(to.active_jobs().unwrap().len(), 2);
    assert_eq!(to.plugin("big").unwrap().unwrap(), plugin);
    assert_eq!(to.pipelines::<String>().unwrap(), ["first", "second"]);
    assert_eq!(to.next_id("jobs").unwrap(), 4, "counters number on");
    assert_eq!(
        to.meta::<Vec<u64>>("ledger_checkpoint").unwrap(),
        Some(vec![7])
    );
    let events = to.events(None, 10).unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>(),
        ["at 10", "at 20", "at 30"]
    );
    let seqs_before: Vec<u64> = events.iter().map(|e| e.seq).collect();
    to.event(40, None, "k", "new".into()).unwrap();
    let last = to.events(None, 1).unwrap()[0].seq;
    assert!(last > *seqs_before.last().unwrap(), "event numbers go on");
    assert_eq!(
        to.job_decisions(3).unwrap(),
        Some(serde_json::json!([{"why": "kept"}]))
    );
    let mut seqs = Vec::new();
    to.each_accounting_since(None, |s, _| seqs.push(s)).unwrap();
    assert_eq!(seqs, [1, 2], "the ledger's checkpoint names these numbers");
    assert_eq!(
        to.accounting(&AccountingFilter::default()).unwrap().len(),
        2
    );
    assert!(
        !to.put_accounting(&record(3)).unwrap(),
        "still written once"
    );
}
