#![allow(clippy::unwrap_used)]
use super::*;
use gantry_api::model::JobSpec;

fn job(id: u64, user: &str, state: JobState, end_ms: Option<u64>) -> JobRecord {
    let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    spec.user = user.into();
    let mut j = JobRecord::new(id, spec, id);
    j.state = state;
    j.end_ms = end_ms;
    j
}

fn ids(it: impl Iterator<Item = u64>) -> Vec<u64> {
    it.collect()
}

#[test]
fn the_index_follows_each_write_of_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store
        .put_job(&job(1, "ann", JobState::Pending, None))
        .unwrap();
    store
        .put_job(&job(2, "bob", JobState::Running, None))
        .unwrap();
    store
        .put_job(&job(3, "ann", JobState::Pending, None))
        .unwrap();
    let active: Vec<u64> = store.active_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(active, vec![1, 2, 3]);
    // Job 1 ends: it leaves the pending index and enters the ended one.
    store
        .put_job(&job(1, "ann", JobState::Failed, Some(500)))
        .unwrap();
    let pending = Some((JobIndex::State, "pending"));
    assert_eq!(ids(store.ids_newest_first(pending, None)), vec![3]);
    let failed = Some((JobIndex::State, "failed"));
    assert_eq!(ids(store.ids_newest_first(failed, None)), vec![1]);
    assert_eq!(store.ended_before(501, 10).unwrap(), vec![(500, 1)]);
    assert!(store.ended_before(500, 10).unwrap().is_empty());
    assert_eq!(store.ended_since(400).unwrap()[0].id, 1);
    let active: Vec<u64> = store.active_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(active, vec![2, 3]);
}

#[test]
fn lists_are_newest_first_under_an_index_and_resume_below_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for id in 1..=6 {
        let user = if id % 2 == 0 { "ann" } else { "annie" };
        store
            .put_job(&job(id, user, JobState::Pending, None))
            .unwrap();
    }
    let ann = Some((JobIndex::User, "ann"));
    assert_eq!(ids(store.ids_newest_first(ann, None)), vec![6, 4, 2]);
    assert_eq!(ids(store.ids_newest_first(ann, Some(4))), vec![2]);
    assert_eq!(ids(store.ids_newest_first(None, Some(3))), vec![2, 1]);
    assert!(ids(store.ids_newest_first(Some((JobIndex::User, "an")), None)).is_empty());
}

#[test]
fn a_deleted_job_leaves_no_key_and_an_old_database_is_indexed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        store
            .put_job(&job(1, "ann", JobState::Succeeded, Some(10)))
            .unwrap();
        store
            .put_job(&job(2, "ann", JobState::Pending, None))
            .unwrap();
        store.delete_job(1).unwrap();
        assert!(store.job(1).unwrap().is_none());
        assert!(store.ended_before(u64::MAX, 10).unwrap().is_empty());
        // As a database written before the index: no index, no version.
        store.state.clear(crate::state::Table::JobIndex).unwrap();
        store
            .state
            .apply(
                None,
                vec![crate::state::KvOp::Delete(
                    crate::state::Table::Meta,
                    INDEX_META.as_bytes().to_vec(),
                )],
            )
            .unwrap();
        store.flush().unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let ann = Some((JobIndex::User, "ann"));
    assert_eq!(ids(store.ids_newest_first(ann, None)), vec![2]);
    assert_eq!(store.active_jobs().unwrap().len(), 1);
}

#[test]
fn a_jobs_events_are_read_through_its_index_and_deleted_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for (at, job) in [(1, Some(7)), (2, Some(8)), (3, None), (4, Some(7))] {
        store.event(at, job, "k", format!("at {at}")).unwrap();
    }
    let of7: Vec<u64> = store
        .events(Some(7), 10)
        .unwrap()
        .iter()
        .map(|e| e.at_ms)
        .collect();
    assert_eq!(of7, vec![1, 4]);
    assert_eq!(store.events(Some(7), 1).unwrap()[0].at_ms, 4);
    assert_eq!(store.events(None, 10).unwrap().len(), 4);
    assert_eq!(store.delete_events_before(3, 100).unwrap(), 2);
    assert_eq!(store.events(Some(7), 10).unwrap().len(), 1);
    assert!(store.events(Some(8), 10).unwrap().is_empty());
    store.delete_job_history(7).unwrap();
    assert_eq!(store.events(None, 10).unwrap().len(), 1);
}
