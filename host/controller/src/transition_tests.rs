#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use gantry_api::model::JobSpec;
use gantry_contract::ReasonCode;
use proptest::prelude::*;

fn reason(message: &str) -> ReasonView {
    super::super::transition::host_reason(ReasonCode::Other, message.into())
}

fn pending(id: u64) -> JobRecord {
    let spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    JobRecord::new(id, spec, 0)
}

fn task() -> TaskRecord {
    TaskRecord {
        node: "n0".into(),
        gpus: Vec::new(),
        cpu_milli: 100,
        memory_mib: 64,
        pid: None,
        exit: None,
        started_ms: Some(10),
        ended_ms: None,
        usage: None,
        gpu_usage: None,
    }
}

fn started(tasks: usize) -> Transition {
    Transition::Started(Box::new(StartedRun {
        at_ms: 10,
        tier: 1,
        score: 0.5,
        tasks: vec![task(); tasks],
        rendezvous_port: Some(4000),
        service_port: None,
    }))
}

fn ended(task: usize, code: i32) -> Transition {
    Transition::TaskEnded {
        task,
        exit: TaskExit::Exited(code),
        ended_ms: Some(20),
        usage: Some(TaskUsage {
            cpu_ms: 5,
            memory_peak_mib: 3,
            oom_killed: false,
        }),
    }
}

fn finished(state: JobState) -> Transition {
    Transition::Finished {
        state,
        end_reason: "completed".into(),
        exit_code: 0,
        end_ms: 30,
        reason: None,
    }
}

#[test]
fn a_job_runs_its_tasks_and_finishes() {
    let mut job = pending(1);
    apply(&mut job, started(2)).unwrap();
    assert_eq!(
        (job.state, job.start_ms, job.tasks.len()),
        (JobState::Running, Some(10), 2)
    );
    apply(&mut job, Transition::TaskLaunched { task: 0, pid: 77 }).unwrap();
    apply(&mut job, ended(0, 0)).unwrap();
    let early = apply(&mut job, finished(JobState::Succeeded)).unwrap_err();
    assert_eq!(early.why, "a job finishes once all its tasks ended");
    apply(&mut job, ended(1, 0)).unwrap();
    apply(&mut job, finished(JobState::Succeeded)).unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    assert_eq!((job.exit_code, job.end_ms), (Some(0), Some(30)));
}

#[test]
fn a_task_ends_once_and_runs_as_one_process() {
    let mut job = pending(1);
    apply(&mut job, started(1)).unwrap();
    apply(&mut job, Transition::TaskLaunched { task: 0, pid: 5 }).unwrap();
    // The same launch reported twice (an agent's replay) is the same process.
    apply(&mut job, Transition::TaskLaunched { task: 0, pid: 5 }).unwrap();
    let other = apply(&mut job, Transition::TaskLaunched { task: 0, pid: 6 }).unwrap_err();
    assert_eq!(other.transition, "task-launched");
    apply(&mut job, ended(0, 3)).unwrap();
    let twice = apply(&mut job, ended(0, 0)).unwrap_err();
    assert_eq!(twice.why, "the task already ended");
    assert_eq!(job.tasks[0].exit, Some(TaskExit::Exited(3)));
    assert!(apply(&mut job, ended(9, 0)).is_err(), "no such task");
}

#[test]
fn a_service_sums_the_usage_of_its_runs() {
    let mut job = pending(1);
    apply(&mut job, started(1)).unwrap();
    apply(&mut job, ended(0, 1)).unwrap();
    apply(&mut job, Transition::ServiceBackOff { until_ms: 99 }).unwrap();
    assert_eq!(job.restart_at_ms, Some(99));
    apply(&mut job, Transition::ServiceRelaunched { at_ms: 100 }).unwrap();
    assert_eq!((job.restarts, job.restart_at_ms), (1, None));
    assert_eq!(
        (job.tasks[0].exit, job.tasks[0].started_ms),
        (None, Some(100))
    );
    apply(&mut job, ended(0, 1)).unwrap();
    assert_eq!(job.tasks[0].usage.unwrap().cpu_ms, 10);
}

#[test]
fn the_first_stop_cause_wins_unless_it_was_a_failed_gang_member() {
    let mut job = pending(1);
    apply(&mut job, started(1)).unwrap();
    apply(&mut job, Transition::StopRequested(StopCause::Cancel)).unwrap();
    apply(&mut job, Transition::StopRequested(StopCause::LaunchFailed)).unwrap();
    assert_eq!(job.stopping, Some(StopCause::Cancel));

    let mut gang = pending(2);
    apply(&mut gang, started(2)).unwrap();
    apply(&mut gang, Transition::StopRequested(StopCause::GangFailed)).unwrap();
    let down = StopCause::NodeDown { node: "n0".into() };
    apply(&mut gang, Transition::StopRequested(down.clone())).unwrap();
    apply(&mut gang, Transition::StopRequested(StopCause::TimeLimit)).unwrap();
    assert_eq!(gang.stopping, Some(down));
}

#[test]
fn requeues_count_but_an_unlaunched_run_is_forgotten_uncounted() {
    let mut job = pending(1);
    apply(&mut job, started(1)).unwrap();
    apply(
        &mut job,
        Transition::Unlaunched {
            reason: reason("restart"),
        },
    )
    .unwrap();
    assert_eq!(
        (job.state, job.requeues, job.tasks.len()),
        (JobState::Pending, 0, 0)
    );
    apply(&mut job, started(1)).unwrap();
    apply(&mut job, Transition::TaskLaunched { task: 0, pid: 5 }).unwrap();
    let launched = apply(
        &mut job,
        Transition::Unlaunched {
            reason: reason("x"),
        },
    );
    assert!(launched.is_err(), "a launched run is not forgotten");
    apply(&mut job, ended(0, 137)).unwrap();
    apply(
        &mut job,
        Transition::Requeued {
            reason: reason("evicted"),
        },
    )
    .unwrap();
    assert_eq!(
        (job.state, job.requeues, job.start_ms),
        (JobState::Pending, 1, None)
    );
}

#[test]
fn an_undone_start_puts_the_pending_job_back_with_its_reason() {
    let mut job = pending(1);
    let before = job.clone();
    apply(&mut job, started(1)).unwrap();
    let undo = Transition::StartUndone {
        before: Box::new(before.clone()),
        reason: reason("disk full"),
    };
    apply(&mut job, undo).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.reason.as_ref().unwrap().message, "disk full");
    let mut other = pending(2);
    apply(&mut other, started(1)).unwrap();
    let wrong = Transition::StartUndone {
        before: Box::new(before),
        reason: reason("x"),
    };
    assert!(apply(&mut other, wrong).is_err(), "another job's record");
}

#[test]
fn only_a_pending_job_is_cancelled_at_once() {
    let cancel = || Transition::CancelledPending {
        end_reason: "cancelled".into(),
        reason: reason("cancelled while pending"),
        at_ms: 5,
    };
    let mut job = pending(1);
    apply(&mut job, cancel()).unwrap();
    assert_eq!((job.state, job.end_ms), (JobState::Cancelled, Some(5)));
    let mut running = pending(2);
    apply(&mut running, started(1)).unwrap();
    assert!(apply(&mut running, cancel()).is_err());
}

#[test]
fn a_held_job_does_not_start_until_released() {
    let mut job = pending(1);
    apply(
        &mut job,
        Transition::Held {
            by: "alice".into(),
            role: HoldRole::User,
        },
    )
    .unwrap();
    let start = apply(&mut job, started(1)).unwrap_err();
    assert_eq!(start.why, "a held job does not start");
    apply(&mut job, Transition::Released).unwrap();
    assert!(
        apply(&mut job, Transition::Released).is_err(),
        "not held any more"
    );
    apply(&mut job, started(1)).unwrap();
    let running = apply(
        &mut job,
        Transition::Held {
            by: "alice".into(),
            role: HoldRole::User,
        },
    )
    .unwrap_err();
    assert_eq!(running.why, "only a pending job is held or updated");
}

/// Any transition, with small task indexes so that some apply and some do not.
fn any_transition() -> impl Strategy<Value = Transition> {
    let exit = prop_oneof![
        (0..3i32).prop_map(TaskExit::Exited),
        Just(TaskExit::Lost),
        Just(TaskExit::Signaled(9)),
    ];
    let cause = prop_oneof![
        Just(StopCause::Cancel),
        Just(StopCause::TimeLimit),
        Just(StopCause::GangFailed),
        Just(StopCause::LaunchFailed),
        Just(StopCause::NodeDown { node: "n0".into() }),
        Just(StopCause::Evicted { for_job: 9 }),
    ];
    let terminal = prop_oneof![
        Just(JobState::Succeeded),
        Just(JobState::Failed),
        Just(JobState::Cancelled),
        Just(JobState::TimedOut),
        Just(JobState::Preempted),
        Just(JobState::Running),
    ];
    prop_oneof![
        (1..3usize).prop_map(started),
        (0..3usize, 1..4u32).prop_map(|(task, pid)| Transition::TaskLaunched { task, pid }),
        (0..3usize, exit).prop_map(|(task, exit)| Transition::TaskEnded {
            task,
            exit,
            ended_ms: Some(20),
            usage: None,
        }),
        Just(Transition::ServiceRelaunched { at_ms: 40 }),
        cause.prop_map(Transition::StopRequested),
        Just(Transition::Warned),
        (0..100u64).prop_map(|at_ms| Transition::SignalScheduled(DueSignal {
            at_ms,
            signal: 15,
            grace_s: 1,
        })),
        Just(Transition::DueSignalSent),
        Just(Transition::Requeued {
            reason: reason("requeued")
        }),
        Just(Transition::Unlaunched {
            reason: reason("restart")
        }),
        terminal.prop_map(finished),
        Just(Transition::CancelledPending {
            end_reason: "cancelled".into(),
            reason: reason("cancelled"),
            at_ms: 50,
        }),
        Just(Transition::Held {
            by: "alice".into(),
            role: HoldRole::User,
        }),
        Just(Transition::Released),
    ]
}

proptest! {
    /// Whatever the daemon asks in whatever order: a refused transition changes nothing,
    /// an ended job never changes again, a running job has a run, a pending one has none,
    /// and a task's end is never rewritten within a run.
    #[test]
    fn every_sequence_keeps_the_lifecycle_consistent(
        steps in proptest::collection::vec(any_transition(), 1..40)
    ) {
        let mut job = pending(1);
        for t in steps {
            let before = job.clone();
            let same_run = matches!(t, Transition::TaskLaunched { .. } | Transition::TaskEnded { .. }
                | Transition::StopRequested(_) | Transition::Warned
                | Transition::SignalScheduled(_) | Transition::DueSignalSent);
            match apply(&mut job, t) {
                Err(_) => prop_assert_eq!(&job, &before),
                Ok(()) => {
                    prop_assert!(!before.state.is_terminal(), "an ended job changed");
                    prop_assert!(job.requeues >= before.requeues);
                    if same_run {
                        for (a, b) in before.tasks.iter().zip(&job.tasks) {
                            if a.exit.is_some() {
                                prop_assert_eq!(a.exit, b.exit);
                            }
                        }
                    }
                }
            }
            match job.state {
                JobState::Running => {
                    prop_assert!(!job.tasks.is_empty() && job.start_ms.is_some());
                    prop_assert!(job.held_by.is_none(), "a held job started");
                }
                JobState::Pending => {
                    prop_assert!(job.start_ms.is_none() && job.stopping.is_none());
                    prop_assert!(job.signal_due.is_none(), "a signal due outlived its run");
                }
                _ => prop_assert!(
                    job.end_ms.is_some() && job.stopping.is_none() && job.signal_due.is_none()
                ),
            }
        }
    }
}

/// The guard of "one owner": outside `transition.rs` (and tests), no code of the daemon
/// assigns a job's lifecycle fields. A new path that changes a job adds a transition.
#[test]
fn no_code_outside_transition_rs_sets_a_jobs_lifecycle_fields() {
    const ASSIGNMENTS: &[&str] = &[
        "job.state = ",
        ".state = JobState::",
        ".stopping = ",
        "stopping.get_or_insert(",
        "stopping.take()",
        ".pid = Some(",
        ".pid = None",
        ".exit = Some(",
        ".exit = None",
        "requeues += ",
        "restarts += ",
        ".start_ms = ",
        ".end_ms = Some(",
        "restart_at_ms = ",
        "job.tasks = ",
        ".warned = ",
        ".exit_code = ",
        ".end_reason = ",
        ".held_by = ",
        ".signal_due = ",
    ];
    let found: Vec<String> = super::super::source_scan::code_lines(&["transition.rs"])
        .into_iter()
        .filter(|(_, _, line)| ASSIGNMENTS.iter().any(|a| line.contains(a)))
        .map(|(file, n, line)| format!("{file}:{n}: {}", line.trim()))
        .collect();
    assert!(
        found.is_empty(),
        "lifecycle fields set outside transition.rs:\n{}",
        found.join("\n")
    );
}
