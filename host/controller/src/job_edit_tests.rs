#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::super::job_table::JobTable;
use super::super::transition::{Transition, host_reason};
use super::*;
use gantry_api::model::{JobSpec, JobState, StopCause, TaskRecord};
use gantry_contract::ReasonCode;

fn pending(id: u64) -> JobRecord {
    let spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    JobRecord::new(id, spec, id)
}

fn running(id: u64) -> JobRecord {
    let mut j = pending(id);
    j.state = JobState::Running;
    j.start_ms = Some(1);
    j.tasks = vec![TaskRecord {
        node: "n0".into(),
        gpus: Vec::new(),
        cpu_milli: 0,
        memory_mib: 0,
        pid: Some(42),
        exit: None,
        started_ms: Some(1),
        ended_ms: None,
        usage: None,
        gpu_usage: None,
    }];
    j
}

/// A table of `records`, each also in its store as it is.
fn table(records: Vec<JobRecord>) -> (JobTable, Store) {
    let t = JobTable::in_memory(records.clone());
    let store = t.store().clone();
    for r in &records {
        store.put_job(r).unwrap();
    }
    (t, store)
}

#[test]
fn a_transition_is_written_once_when_its_edit_ends_and_not_before() {
    let (mut t, store) = table(vec![running(1)]);
    {
        let mut job = t.edit(1).unwrap();
        assert!(job.apply_or_log(Transition::StopRequested(StopCause::Cancel)));
        assert_eq!(
            job.stopping,
            Some(StopCause::Cancel),
            "the edit reads its change"
        );
        assert_eq!(
            store.job(1).unwrap().unwrap().stopping,
            None,
            "written when the edit ends, once, not per transition"
        );
    }
    assert_eq!(
        store.job(1).unwrap().unwrap().stopping,
        Some(StopCause::Cancel)
    );
    assert_eq!(t.get(1).unwrap().stopping, Some(StopCause::Cancel));
}

#[test]
fn an_edit_that_only_reads_or_annotates_for_display_writes_nothing() {
    let (mut t, store) = table(vec![pending(1), running(2)]);
    // Someone else's newer record in the store: a read-only edit must not replace it.
    let mut newer = pending(1);
    newer.requeues = 7;
    store.put_job(&newer).unwrap();
    {
        let mut job = t.edit(1).unwrap();
        assert_eq!(job.state, JobState::Pending);
        job.annotate(Annotation::Priority {
            tier: 3,
            score: 0.5,
        });
        job.annotate(Annotation::Reason(host_reason(
            ReasonCode::Other,
            "waits".into(),
        )));
    }
    for job in t.edit_running() {
        assert_eq!(job.id, 2);
    }
    assert_eq!(
        store.job(1).unwrap().unwrap().requeues,
        7,
        "nothing written"
    );
    assert_eq!(t.get(1).unwrap().tier, 3, "the annotation is in memory");
    // The display annotations travel with the record's next durable change.
    t.edit(1).unwrap().annotate(Annotation::ServicePort(9000));
    let stored = store.job(1).unwrap().unwrap();
    assert_eq!((stored.service_port, stored.tier), (Some(9000), 3));
    assert_eq!(stored.reason.map(|r| r.message), Some("waits".to_string()));
}

#[test]
fn a_refused_transition_changes_neither_memory_nor_the_store() {
    let (mut t, store) = table(vec![pending(1)]);
    let before = t.get(1).unwrap().clone();
    {
        let mut job = t.edit(1).unwrap();
        let refused = job.apply(Transition::TaskLaunched { task: 0, pid: 9 });
        assert!(refused.is_err(), "a pending job has no task to launch");
    }
    assert_eq!(t.get(1).unwrap(), &before);
    assert_eq!(store.job(1).unwrap().unwrap(), before);
}

#[test]
fn a_cycle_keeps_the_version_it_was_given_while_an_edit_changes_the_table() {
    let (mut t, _store) = table(vec![running(1)]);
    let given = t.shared_active();
    t.edit(1)
        .unwrap()
        .apply_or_log(Transition::StopRequested(StopCause::TimeLimit));
    assert_eq!(
        given[0].stopping, None,
        "copied on write, not changed under the cycle"
    );
    assert_eq!(t.get(1).unwrap().stopping, Some(StopCause::TimeLimit));
}

#[test]
fn an_explicit_write_answers_and_is_not_repeated() {
    let (mut t, store) = table(vec![pending(1)]);
    let mut job = t.edit(1).unwrap();
    job.apply_or_log(Transition::CancelledPending {
        end_reason: "cancelled".into(),
        reason: host_reason(ReasonCode::Other, "cancelled while pending".into()),
        at_ms: 5,
    });
    job.write().unwrap();
    assert_eq!(store.job(1).unwrap().unwrap().state, JobState::Cancelled);
}

/// The guard of "one writer": outside the writer's files, no code of the daemon writes a
/// job record to the store, reaches a record to change it, or applies a transition itself.
/// A new path that changes a job opens a `JobEdit` (`JobTable::edit`, `edit_running`).
#[test]
fn only_the_writer_changes_or_stores_a_job() {
    const WRITER: &[&str] = &[
        "job_edit.rs",
        "job_table.rs",
        "jobs_in_memory.rs",
        "start_commit.rs",
        "transition.rs",
    ];
    const FORBIDDEN: &[&str] = &[
        "put_job(",
        "put_new_job(",
        "archive_job",
        "slot_mut(",
        "running_slots_mut(",
        "transition::apply",
        "jobs.get_mut(",
        "persist(",
        "DerefMut for JobEdit",
    ];
    let found: Vec<String> = super::super::source_scan::code_lines(WRITER)
        .into_iter()
        .filter(|(_, _, line)| {
            let code = line.split("//").next().unwrap_or_default();
            FORBIDDEN.iter().any(|f| code.contains(f))
        })
        .map(|(file, n, line)| format!("{file}:{n}: {}", line.trim()))
        .collect();
    assert!(
        found.is_empty(),
        "job records changed or written outside the writer (job_edit.rs):\n{}",
        found.join("\n")
    );
}
