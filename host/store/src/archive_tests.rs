#![allow(clippy::unwrap_used)]
use super::*;
use gantry_api::model::{ArrayMember, JobSpec, JobState};

fn ended(id: u64, user: &str, end_ms: u64) -> JobRecord {
    let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    spec.user = user.into();
    let mut j = JobRecord::new(id, spec, id);
    j.state = JobState::Succeeded;
    j.end_ms = Some(end_ms);
    j
}

fn ids(it: impl Iterator<Item = u64>) -> Vec<u64> {
    it.collect()
}

#[test]
fn an_archived_job_leaves_sled_and_every_read_still_finds_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut member = ended(1, "ann", 100);
    member.array = Some(ArrayMember {
        array_id: 1,
        index: 0,
        max_running: None,
        count: 0,
        min: 0,
        max: 0,
    });
    store.put_job(&member).unwrap();
    store.put_job(&ended(2, "bob", 200)).unwrap();
    store.put_job(&ended(3, "ann", 300)).unwrap();
    store.archive_job(&member).unwrap();
    store.archive_job(&ended(3, "ann", 300)).unwrap();
    assert!(
        store
            .state
            .get(crate::state::Table::Jobs, &1u64.to_be_bytes())
            .unwrap()
            .is_none(),
        "sled let go"
    );
    assert_eq!(store.job(1).unwrap().unwrap(), member);
    assert!(store.has_job(3).unwrap());
    assert_eq!(store.job_count().unwrap(), 3);
    // Live (2) and archived (1, 3) merge newest first, under an index and below a cursor.
    assert_eq!(ids(store.ids_newest_first(None, None)), vec![3, 2, 1]);
    let ann = Some((JobIndex::User, "ann"));
    assert_eq!(ids(store.ids_newest_first(ann, None)), vec![3, 1]);
    assert_eq!(ids(store.ids_newest_first(ann, Some(3))), vec![1]);
    let succeeded = Some((JobIndex::State, "succeeded"));
    assert_eq!(ids(store.ids_newest_first(succeeded, None)), vec![3, 2, 1]);
    assert_eq!(
        store.ended_before(301, 10).unwrap(),
        vec![(100, 1), (200, 2), (300, 3)]
    );
    assert_eq!(
        store.ended_between((100, 1), 301, 1).unwrap(),
        vec![(200, 2)]
    );
    assert_eq!(store.array_member_ids(1).unwrap(), vec![1]);
    store.delete_job(1).unwrap();
    assert!(store.job(1).unwrap().is_none());
    assert!(store.array_member_ids(1).unwrap().is_empty());
    // A reopened store reads the archive from its file.
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(ids(store.ids_newest_first(None, None)), vec![3, 2]);
}

#[test]
fn a_job_a_crash_left_in_both_places_is_read_once_and_archived_at_the_next_load() {
    let store = Store::temporary().unwrap();
    let mut old = ended(5, "ann", 50);
    store.put_archived(&[&old]).unwrap();
    // sled's copy is the newer one (the archive's write landed, sled's delete did not).
    old.exit_code = Some(3);
    store.put_job(&old).unwrap();
    assert_eq!(store.job(5).unwrap().unwrap().exit_code, Some(3));
    assert_eq!(ids(store.ids_newest_first(None, None)), vec![5]);
    assert_eq!(store.ended_before(100, 10).unwrap(), vec![(50, 5)]);
    assert_eq!(store.archive_ended_before(100).unwrap(), 1);
    assert!(store.state.count(crate::state::Table::Jobs).unwrap() == 0);
    assert_eq!(store.job(5).unwrap().unwrap().exit_code, Some(3));
    // A job that ended after the cutoff stays in sled (it stays in memory).
    store.put_job(&ended(6, "ann", 500)).unwrap();
    assert_eq!(store.archive_ended_before(100).unwrap(), 0);
    assert_eq!(store.ended_since(400).unwrap().len(), 1);
}

#[test]
fn an_old_database_moves_its_event_log_decisions_and_accounting_into_sqlite_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        // Write the trees as a database from before the history database did.
        let events = store.sled.as_ref().unwrap().open_tree("events").unwrap();
        for (seq, job) in [(11u64, Some(7u64)), (12, None)] {
            let e = crate::Event {
                seq,
                at_ms: seq * 10,
                job,
                kind: "k".into(),
                message: format!("m{seq}"),
            };
            events.insert(seq.to_be_bytes(), encode(&e)).unwrap();
        }
        let decisions = store
            .sled
            .as_ref()
            .unwrap()
            .open_tree("job_decisions")
            .unwrap();
        decisions
            .insert(
                7u64.to_be_bytes(),
                encode(&serde_json::json!([{"why": "old"}])),
            )
            .unwrap();
        let accounting = store
            .sled
            .as_ref()
            .unwrap()
            .open_tree("accounting")
            .unwrap();
        let r = crate::AccountingRecord {
            job_id: 7,
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
            end_ms: 900,
            gpu_milli_seconds: 0,
            cpu_seconds: 0.5,
            memory_peak_mib: 1,
            exit: gantry_api::task::TaskExit::Exited(0),
            oom_killed: false,
            uncharged: None,
            gpu_used_milli_seconds: None,
        };
        let mut key = 900u64.to_be_bytes().to_vec();
        key.extend_from_slice(&40u64.to_be_bytes());
        accounting.insert(key, encode(&r)).unwrap();
        store
            .state
            .apply(
                None,
                vec![crate::state::KvOp::Delete(
                    crate::state::Table::Meta,
                    crate::migrate::MOVED_META.as_bytes().to_vec(),
                )],
            )
            .unwrap();
        store.flush().unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let events = store.events(None, 10).unwrap();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![11, 12]
    );
    assert_eq!(store.events(Some(7), 10).unwrap()[0].message, "m11");
    assert_eq!(
        store.job_decisions(7).unwrap(),
        Some(serde_json::json!([{"why": "old"}]))
    );
    let mut seqs = Vec::new();
    store
        .each_accounting_since(None, |s, _| seqs.push(s))
        .unwrap();
    assert_eq!(
        seqs,
        vec![40],
        "the ledger's checkpoint names these numbers"
    );
    assert!(
        !store
            .sled
            .as_ref()
            .unwrap()
            .tree_names()
            .iter()
            .any(|t| t.as_ref() == b"events")
    );
    // New rows number on from the moved ones.
    store.event(200, None, "k", "new".into()).unwrap();
    assert_eq!(store.events(None, 1).unwrap()[0].seq, 13);
}

#[test]
fn deleted_history_gives_its_space_back_to_the_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let big = "x".repeat(2000);
    for at in 0..3000 {
        store.event(at, Some(at), "k", big.clone()).unwrap();
    }
    store.flush().unwrap();
    store.history.sync_now().unwrap();
    let before = store.size_on_disk().unwrap();
    assert_eq!(store.delete_events_before(u64::MAX, 10_000).unwrap(), 3000);
    let released = store.release_free_space().unwrap();
    let after = store.size_on_disk().unwrap();
    assert!(released > 4_000_000, "released {released}");
    assert!(after + 4_000_000 < before, "{before} -> {after}");
    // What it says it released is what the file lost (the WAL is cut back, too).
    assert!(
        released <= before - after,
        "released {released}, {before} -> {after}"
    );
    assert!(
        released + 1_000_000 >= before - after,
        "released {released}, {before} -> {after}"
    );
    assert_eq!(
        store.release_free_space().unwrap(),
        0,
        "nothing more to give back"
    );
}
