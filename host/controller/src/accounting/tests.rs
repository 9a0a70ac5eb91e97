//! Record math, the incremental ledger against the direct decay formula, and the decayed
//! usage a snapshot gives plugins.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use gantry_api::model::{GpuShareView, JobSpec, JobState, TaskRecord};
use gantry_node::inventory::NodeInfo;
use gantry_store::Store;

const HOUR_S: f64 = 3600.0;

fn task(shares: &[(u32, u32)], started_ms: Option<u64>) -> TaskRecord {
    TaskRecord {
        node: "n0".into(),
        gpus: shares
            .iter()
            .map(|&(index, milli)| GpuShareView { index, milli })
            .collect(),
        cpu_milli: 500,
        memory_mib: 256,
        pid: Some(4242),
        exit: None,
        started_ms,
        ended_ms: None,
        usage: None,
        gpu_usage: None,
    }
}

fn job(id: u64, user: &str, account: &str, tasks: Vec<TaskRecord>) -> JobRecord {
    let mut spec: JobSpec = serde_json::from_value(serde_json::json!({
        "name": format!("job-{id}"), "argv": ["true"], "user": user, "account": account,
    }))
    .unwrap();
    spec.validate().unwrap();
    let mut j = JobRecord::new(id, spec, 0);
    j.state = JobState::Running;
    j.start_ms = Some(1_000);
    j.tasks = tasks;
    j
}

#[test]
fn a_record_charges_each_share_for_the_wall_time_of_its_process() {
    let mut j = job(
        7,
        "alice",
        "ml",
        vec![
            task(&[(0, 250)], Some(1_000)),
            task(&[(1, 1000), (2, 1000)], None),
        ],
    );
    j.requeues = 1;
    j.restarts = 2;
    let usage = TaskUsage {
        cpu_ms: 1_500,
        memory_peak_mib: 40,
        oom_killed: true,
    };
    let r = record(&j, 0, 4_500, TaskExit::Signaled(9), usage).unwrap();
    assert_eq!(r.gpu_milli_seconds, 875, "250 milli x 3.5 s");
    assert_eq!((r.start_ms, r.end_ms, r.run), (1_000, 4_500, 3));
    assert_eq!(
        (r.cpu_seconds, r.memory_peak_mib, r.oom_killed),
        (1.5, 40, true)
    );
    assert_eq!((r.user.as_str(), r.account.as_str()), ("alice", "ml"));
    assert_eq!(
        (r.job_name.as_str(), r.queue.as_str()),
        ("job-7", "default")
    );
    assert_eq!(r.exit, TaskExit::Signaled(9));
    // A task without its own start time runs from the job's start.
    let whole = record(&j, 1, 3_000, TaskExit::Exited(0), TaskUsage::default()).unwrap();
    assert_eq!(whole.gpu_milli_seconds, 4_000, "two GPUs x 2 s");
    assert_eq!(whole.gpu_seconds(), 4.0);
    // An end seen before the start is a zero-length run, never a negative one.
    let early = record(&j, 0, 500, TaskExit::Lost, TaskUsage::default()).unwrap();
    assert_eq!((early.end_ms, early.gpu_milli_seconds), (1_000, 0));
    // A task that never started has no record.
    j.start_ms = None;
    assert!(record(&j, 1, 3_000, TaskExit::Lost, TaskUsage::default()).is_none());
    assert!(record(&j, 9, 3_000, TaskExit::Lost, TaskUsage::default()).is_none());
}

#[test]
fn a_run_stopped_by_a_gpu_fault_is_recorded_but_not_charged() {
    let mut j = job(8, "alice", "ml", vec![task(&[(1, 1000)], Some(1_000))]);
    j.stopping = Some(gantry_api::model::StopCause::GpuFault {
        node: "n2".into(),
        gpu: 1,
        reason: "critical Xid error 79".into(),
    });
    let r = record(&j, 0, 11_000, TaskExit::Signaled(15), TaskUsage::default()).unwrap();
    assert_eq!(r.gpu_milli_seconds, 10_000, "listed in full");
    assert_eq!(
        r.uncharged.as_deref(),
        Some("GPU 1 of node n2 failed: critical Xid error 79")
    );
    let mut ledger = Ledger::new(HOUR_S);
    ledger.add(&r);
    let (users, accounts) = ledger.closed(11_000);
    assert!(users.is_empty() && accounts.is_empty(), "{users:?}");
    j.stopping = None;
    let charged = record(&j, 0, 11_000, TaskExit::Exited(0), TaskUsage::default()).unwrap();
    assert_eq!(charged.uncharged, None);
    ledger.add(&charged);
    assert_eq!(ledger.closed(11_000).0["alice"], 10.0);
}

/// Records ending at `ends` (out of order on purpose), `milli` each for 10 s.
fn records(ends: &[(u64, &str, &str, u64)]) -> Vec<AccountingRecord> {
    ends.iter()
        .map(|&(end_ms, user, account, milli)| {
            let mut j = job(
                end_ms,
                user,
                account,
                vec![task(&[(0, milli as u32)], None)],
            );
            j.start_ms = Some(end_ms - 10_000);
            record(&j, 0, end_ms, TaskExit::Exited(0), TaskUsage::default()).unwrap()
        })
        .collect()
}

/// The rule of the old per-job computation: each run halved per half-life since its end.
fn direct(rs: &[AccountingRecord], who: impl Fn(&AccountingRecord) -> bool, now: u64) -> f64 {
    rs.iter()
        .filter(|r| who(r))
        .map(|r| {
            let age_s = now.saturating_sub(r.end_ms) as f64 / 1000.0;
            r.gpu_seconds() * (-age_s / HOUR_S).exp2()
        })
        .sum()
}

#[test]
fn the_incremental_ledger_equals_decaying_every_record_from_its_end() {
    let h = 3_600_000;
    let rs = records(&[
        (5 * h, "alice", "ml", 1000),
        (2 * h, "bob", "ml", 500),
        (7 * h, "alice", "vision", 250),
        (3 * h, "alice", "ml", 1000),
        (7 * h, "carol", "cv", 0),
    ]);
    let mut ledger = Ledger::new(HOUR_S);
    for r in &rs {
        ledger.add(r);
    }
    for now in [7 * h, 7 * h + 1_234_567, 30 * h] {
        let (users, accounts) = ledger.closed(now);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.max(1.0);
        assert!(close(
            users["alice"],
            direct(&rs, |r| r.user == "alice", now)
        ));
        assert!(close(users["bob"], direct(&rs, |r| r.user == "bob", now)));
        assert!(close(
            accounts["ml"],
            direct(&rs, |r| r.account == "ml", now)
        ));
        assert!(close(
            accounts["vision"],
            direct(&rs, |r| r.account == "vision", now)
        ));
        assert!(!users.contains_key("carol"), "no GPUs, no usage");
    }
    // One half-life after the last end, alice's usage is half of what it was then.
    let (then, _) = ledger.closed(7 * h);
    let (later, _) = ledger.closed(8 * h);
    assert!((later["alice"] - then["alice"] / 2.0).abs() < 1e-9);
}

#[test]
fn the_ledger_loaded_from_the_store_matches_the_one_built_as_records_were_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let rs = records(&[(40_000, "alice", "ml", 500), (20_000, "bob", "cv", 1000)]);
    let mut live = Ledger::new(HOUR_S);
    for r in &rs {
        assert!(store.put_accounting(r).unwrap());
        live.add(r);
    }
    assert!(!store.put_accounting(&rs[0]).unwrap());
    let loaded = Ledger::load(&store, HOUR_S).unwrap();
    let now = 100_000;
    assert_eq!(loaded.closed(now), live.closed(now));
    assert!((loaded.closed(now).0["alice"] - direct(&rs, |r| r.user == "alice", now)).abs() < 1e-9);
}

#[test]
fn a_start_reads_the_checkpoint_and_only_the_records_written_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let rs = records(&[(40_000, "alice", "ml", 500), (20_000, "bob", "cv", 1000)]);
    assert!(store.put_accounting(&rs[0]).unwrap());
    // The first load counts every record and saves a checkpoint through it.
    let first = Ledger::load(&store, HOUR_S).unwrap();
    assert!(store.put_accounting(&rs[1]).unwrap());
    assert_eq!(
        store
            .each_accounting_since(first.through_seq, |_, _| {})
            .unwrap(),
        1
    );
    let second = Ledger::load(&store, HOUR_S).unwrap();
    let now = 100_000;
    for who in ["alice", "bob"] {
        let want = direct(&rs, |r| r.user == who, now);
        assert!((second.closed(now).0[who] - want).abs() < 1e-9, "{who}");
    }
    // Records deleted by retention after a checkpoint do not change the loaded sums.
    assert_eq!(store.delete_accounting_before(u64::MAX, 10).unwrap(), 2);
    let third = Ledger::load(&store, HOUR_S).unwrap();
    assert_eq!(third.closed(now), second.closed(now));
    // Another half-life makes the checkpoint useless: everything left is read again.
    assert!(
        Ledger::load(&store, 2.0 * HOUR_S)
            .unwrap()
            .closed(now)
            .0
            .is_empty()
    );
}

#[test]
fn running_tasks_count_in_full_from_their_start_and_ended_ones_not_at_all() {
    let mut j = job(
        1,
        "alice",
        "ml",
        vec![
            task(&[(0, 500)], Some(2_000)),
            task(&[(1, 1000)], Some(1_000)),
        ],
    );
    assert_eq!(running_gpu_seconds(&j, 6_000), 0.5 * 4.0 + 5.0);
    j.tasks[1].exit = Some(TaskExit::Exited(0));
    assert_eq!(running_gpu_seconds(&j, 6_000), 2.0);
}

#[test]
fn snapshots_take_closed_usage_from_the_ledger_and_add_running_tasks() {
    let h = 3_600_000;
    let mut ledger = Ledger::new(HOUR_S);
    // Bob's 10 GPU-seconds ended one half-life ago; alice's job is still running.
    for r in records(&[(h, "bob", "cv", 1000)]) {
        ledger.add(&r);
    }
    let running = job(
        2,
        "alice",
        "ml",
        vec![task(&[(0, 1000)], Some(2 * h - 8_000))],
    );
    let mut finished = job(3, "alice", "ml", vec![task(&[(1, 1000)], Some(0))]);
    finished.state = JobState::Succeeded;
    finished.end_ms = Some(2 * h);
    let node = NodeInfo {
        name: "n0".into(),
        cpu_milli: 8_000,
        memory_mib: 16_384,
        gpus: Vec::new(),
        labels: Default::default(),
        gpu_source: "config".into(),
    };
    let snap = super::super::snapshot::build(
        [&running, &finished].into_iter(),
        &[(0, &node)],
        1,
        2 * h,
        &ledger,
    );
    let usage_of = |table: &[gantry_contract::Usage], who: &str| {
        table
            .iter()
            .find(|u| snap.ctx.strings[u.who as usize] == who)
            .map(|u| u.gpu_seconds)
    };
    assert_eq!(usage_of(&snap.ctx.user_usage, "alice"), Some(8.0));
    assert_eq!(usage_of(&snap.ctx.account_usage, "ml"), Some(8.0));
    let bob = usage_of(&snap.ctx.user_usage, "bob").unwrap();
    assert!(
        (bob - 5.0).abs() < 1e-9,
        "10 GPU-seconds halved once: {bob}"
    );
    assert_eq!(usage_of(&snap.ctx.account_usage, "cv"), Some(bob));
}
