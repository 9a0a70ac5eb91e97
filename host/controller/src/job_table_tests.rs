#![allow(clippy::unwrap_used)]
use super::*;
use gantry_api::model::{ArrayMember, JobSpec};

fn job(id: u64, user: &str, state: JobState) -> JobRecord {
    let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    spec.user = user.into();
    let mut j = JobRecord::new(id, spec, id);
    j.state = state;
    if state.is_terminal() {
        j.end_ms = Some(1_000 + id);
    }
    j
}

fn ids(page: &JobPage) -> Vec<u64> {
    page.jobs.iter().map(|j| j.id).collect()
}

/// A table over a store in `dir` holding `records`, every one written and in memory.
fn table(dir: &std::path::Path, records: Vec<JobRecord>) -> (Store, JobTable) {
    let store = Store::open(dir).unwrap();
    for r in &records {
        store.put_job(r).unwrap();
    }
    let mut t = JobTable::load(&store, 0, 0).unwrap();
    t.insert_stored(&records);
    (store, t)
}

#[test]
fn queries_see_the_jobs_they_name_and_lists_are_newest_first() {
    let t = JobTable::in_memory([
        job(1, "ann", JobState::Pending),
        job(2, "bob", JobState::Running),
        job(3, "ann", JobState::Succeeded),
        job(4, "ann", JobState::Pending),
    ]);
    assert_eq!(t.pending_of("ann"), 2);
    assert_eq!(t.running().map(|j| j.id).collect::<Vec<_>>(), vec![2]);
    assert_eq!(t.unfinished().count(), 3);
    let q = JobQuery {
        user: Some("ann".into()),
        ..JobQuery::default()
    };
    let page = t.list_snapshot(&q, 2).page(&q, 2).unwrap();
    assert_eq!((ids(&page), page.next_after), (vec![4, 3], Some(3)));
    assert!(t.names_job_or_array(3).unwrap() && !t.names_job_or_array(9).unwrap());
}

#[test]
fn an_ended_job_leaves_memory_after_its_age_and_is_still_found_listed_and_depended_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, mut t) = table(
        dir.path(),
        vec![
            job(1, "ann", JobState::Succeeded),
            job(2, "ann", JobState::Running),
            job(3, "bob", JobState::Failed),
        ],
    );
    // Ended at 1001 and 1003: at 1100 with an age of 200 neither is due.
    assert!(t.evict_ended(1_100, 200).is_empty());
    assert_eq!(t.evict_ended(1_202, 200), vec![1]);
    assert_eq!(t.evict_ended(2_000, 200), vec![3]);
    assert_eq!((t.len(), t.get(1).is_none()), (1, true));
    // History answers for the jobs memory let go.
    assert_eq!(t.find(1).unwrap().unwrap().state, JobState::Succeeded);
    assert!(t.names_job_or_array(3).unwrap());
    assert_eq!(t.dependency_targets(3).unwrap()[0].state, JobState::Failed);
    let all = t
        .list_snapshot(&JobQuery::default(), 10)
        .page(&JobQuery::default(), 10)
        .unwrap();
    assert_eq!((ids(&all), all.next_after), (vec![3, 2, 1], None));
    let ann = JobQuery {
        user: Some("ann".into()),
        ..JobQuery::default()
    };
    let first = t.list_snapshot(&ann, 1).page(&ann, 1).unwrap();
    assert_eq!((ids(&first), first.next_after), (vec![2], Some(2)));
    let rest = JobQuery {
        after: first.next_after,
        ..ann
    };
    let second = t.list_snapshot(&rest, 5).page(&rest, 5).unwrap();
    assert_eq!((ids(&second), second.next_after), (vec![1], None));
    let failed = JobQuery {
        state: Some(JobState::Failed),
        ..JobQuery::default()
    };
    assert_eq!(
        ids(&t.list_snapshot(&failed, 5).page(&failed, 5).unwrap()),
        vec![3]
    );
    // Active jobs are all in memory: a list of them reads no history.
    let running = JobQuery {
        state: Some(JobState::Running),
        ..JobQuery::default()
    };
    let page = t.list_snapshot(&running, 5).page(&running, 5).unwrap();
    assert_eq!((ids(&page), page.next_after), (vec![2], None));
}

#[test]
fn a_load_reads_active_and_recently_ended_jobs_only() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(
        dir.path(),
        vec![
            job(1, "ann", JobState::Succeeded),
            job(2, "ann", JobState::Pending),
            job(9, "ann", JobState::Cancelled),
        ],
    );
    // Job 1 ended at 1001, job 9 at 1009: at 1100 with an age of 95 only 9 is recent.
    let t = JobTable::load(&store, 1_100, 95).unwrap();
    let in_memory: Vec<u64> = t.iter().map(|j| j.id).collect();
    assert_eq!(in_memory, vec![2, 9]);
}

#[test]
fn a_dependency_on_an_array_sees_every_member_in_memory_or_history() {
    let dir = tempfile::tempdir().unwrap();
    let member = |id, state| {
        let mut j = job(id, "ann", state);
        j.array = Some(ArrayMember {
            array_id: 5,
            index: (id - 5) as u32,
            max_running: None,
            count: 0,
            min: 0,
            max: 0,
        });
        j
    };
    let (_store, mut t) = table(
        dir.path(),
        vec![member(5, JobState::Failed), member(6, JobState::Succeeded)],
    );
    t.evict_ended(u64::MAX, 0);
    let states: Vec<JobState> = t
        .dependency_targets(5)
        .unwrap()
        .iter()
        .map(|j| j.state)
        .collect();
    assert_eq!(states, vec![JobState::Failed, JobState::Succeeded]);
}

#[test]
fn a_persisted_job_is_read_back_by_the_next_load() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut t = JobTable::load(&store, 0, 0).unwrap();
    let j = job(7, "ann", JobState::Pending);
    store.put_job(&j).unwrap();
    t.insert_stored(std::slice::from_ref(&j));
    // A durable change through the one writer is written when its edit ends.
    t.edit(7)
        .unwrap()
        .annotate(super::super::job_edit::Annotation::ServicePort(8080));
    store.flush().unwrap();
    let again = JobTable::load(&store, 0, 0).unwrap();
    assert_eq!(again.get(7).unwrap().service_port, Some(8080));
}
