//! Every change of a job's lifecycle as a typed transition, checked against the state it
//! applies to and applied here only (as Nomad's state machine applies typed requests).
//!
//! A job moves pending → running (`Started`) → pending again (`Requeued`, `Unlaunched`,
//! `StartUndone`) or to a terminal state (`Finished`); a pending job may be cancelled
//! (`CancelledPending`), held and released, or have its spec updated. While it runs, its tasks are launched, end and (services) restart,
//! and the daemon may ask it to stop; which stop cause wins is decided here too.
//!
//! Owns: which transitions are legal from which state, and which fields of a `JobRecord`
//! each one changes. Does not own deciding them (the cycle's `apply`, `lifecycle`, `adopt`,
//! `node_down`, `launch`, `service`), their effects outside the record (signals, launches,
//! scratch directories, events, accounting) nor writing the record: transitions are applied
//! through a `JobEdit` (`job_edit.rs`, the one writer), which writes the record once, under
//! the job table's lock, when the operation's edit ends. Display annotations a cycle
//! refreshes (a pending job's reason, tier and score), ports and a service's health are not
//! lifecycle: they are `job_edit::Annotation`s.

use gantry_api::model::{
    DueSignal, HoldRole, JobRecord, JobSpec, JobState, ReasonView, StopCause, TaskRecord,
};
use gantry_contract::ReasonCode;
use gantry_node::executor::{TaskExit, TaskUsage};

/// A new run of a pending job, as the cycle's plan placed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StartedRun {
    pub at_ms: u64,
    pub tier: i32,
    pub score: f64,
    pub tasks: Vec<TaskRecord>,
    pub rendezvous_port: Option<u16>,
    pub service_port: Option<u16>,
}

/// One change of a job's lifecycle.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transition {
    /// pending → running on these tasks (a start the cycle committed).
    Started(Box<StartedRun>),
    /// running → back to `before` (pending), with `reason`: the start could not be recorded
    /// durably, so nothing was launched.
    StartUndone {
        before: Box<JobRecord>,
        reason: ReasonView,
    },
    /// A task's process (its shim, or the agent's) is known: launched, or found again.
    TaskLaunched { task: usize, pid: u32 },
    /// A task ended. `ended_ms` and `usage` are left as they were when `None`; a usage is
    /// added to what earlier runs of the task (a service's) used.
    TaskEnded {
        task: usize,
        exit: TaskExit,
        ended_ms: Option<u64>,
        usage: Option<TaskUsage>,
    },
    /// A running service whose tasks all ended waits until `at_ms` to be relaunched.
    ServiceBackOff { until_ms: u64 },
    /// Every task of a running service begins a new run on its allocation.
    ServiceRelaunched { at_ms: u64 },
    /// The daemon asks the running job to stop, for `cause` (see [`replaces`]).
    StopRequested(StopCause),
    /// The warning signal before the time limit was sent.
    Warned,
    /// An evicted job was warned; its checkpoint signal is sent when due.
    SignalScheduled(DueSignal),
    /// The signal scheduled was sent.
    DueSignalSent,
    /// running, every task ended → pending for a new run, counted against the requeue limit.
    Requeued { reason: ReasonView },
    /// running, no task ever launched (a daemon restart in between) → pending; not counted.
    Unlaunched { reason: ReasonView },
    /// running, every task ended → a terminal `state`. A `reason` of `None` keeps the one
    /// the job has (the failure of a task that explains the end).
    Finished {
        state: JobState,
        end_reason: String,
        exit_code: i32,
        end_ms: u64,
        reason: Option<ReasonView>,
    },
    /// A pending job is held by `by`, whose role is `role` (`gantry hold`): it stays
    /// pending, out of every cycle. A hold again replaces the holder (the caller decides
    /// whether it may: `job_control.rs`).
    Held { by: String, role: HoldRole },
    /// A held pending job may start again.
    Released,
    /// A pending job's spec is replaced by `spec` (`gantry update`), validated by the caller.
    Updated(Box<JobSpec>),
    /// pending → cancelled (by its user, or a dependency that can never be met).
    CancelledPending {
        end_reason: String,
        reason: ReasonView,
        at_ms: u64,
    },
}

impl Transition {
    /// Task `task` is lost: it never ran, or nothing is known of its end (its node went
    /// down, its launch failed, a restart found neither its shim nor its exit record).
    pub(crate) fn task_lost(task: usize) -> Self {
        Self::TaskEnded {
            task,
            exit: TaskExit::Lost,
            ended_ms: None,
            usage: None,
        }
    }

    /// The transition's name, for errors and logs.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Started(_) => "started",
            Self::StartUndone { .. } => "start-undone",
            Self::TaskLaunched { .. } => "task-launched",
            Self::TaskEnded { .. } => "task-ended",
            Self::ServiceBackOff { .. } => "service-back-off",
            Self::ServiceRelaunched { .. } => "service-relaunched",
            Self::StopRequested(_) => "stop-requested",
            Self::Warned => "warned",
            Self::SignalScheduled(_) => "signal-scheduled",
            Self::DueSignalSent => "due-signal-sent",
            Self::Requeued { .. } => "requeued",
            Self::Unlaunched { .. } => "unlaunched",
            Self::Finished { .. } => "finished",
            Self::Held { .. } => "held",
            Self::Released => "released",
            Self::Updated(_) => "updated",
            Self::CancelledPending { .. } => "cancelled",
        }
    }
}

/// A transition the job's current state does not allow; the job is left unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {job}: {transition} is not allowed while it is {from}: {why}")]
pub(crate) struct IllegalTransition {
    pub job: u64,
    pub from: &'static str,
    pub transition: &'static str,
    pub why: &'static str,
}

/// Whether a stop for `new` takes the place of the one already asked (`old`). The first
/// cause of a stop is the one the job ends with, except that a gang stopped because one of
/// its tasks failed ends as what took that task down when that is known: its node went
/// down, or a launch failed.
pub(crate) fn replaces(new: &StopCause, old: Option<&StopCause>) -> bool {
    match old {
        None => true,
        Some(StopCause::GangFailed) => {
            matches!(new, StopCause::NodeDown { .. } | StopCause::LaunchFailed)
        }
        Some(_) => false,
    }
}

/// Applies `t` to `job`, or refuses it (leaving `job` unchanged) when its state does not
/// allow it.
pub(crate) fn apply(job: &mut JobRecord, t: Transition) -> Result<(), IllegalTransition> {
    check(job, &t).map_err(|why| IllegalTransition {
        job: job.id,
        from: job.state.as_str(),
        transition: t.name(),
        why,
    })?;
    match t {
        Transition::Started(run) => {
            let run = *run;
            job.state = JobState::Running;
            job.start_ms = Some(run.at_ms);
            job.end_ms = None;
            job.exit_code = None;
            job.stopping = None;
            job.signal_due = None;
            job.reason = None;
            job.tier = run.tier;
            job.score = run.score;
            job.warned = false;
            job.restart_at_ms = None;
            job.rendezvous_port = run.rendezvous_port;
            job.service_port = run.service_port;
            job.tasks = run.tasks;
        }
        Transition::StartUndone { before, reason } => {
            *job = *before;
            job.reason = Some(reason);
        }
        Transition::TaskLaunched { task, pid } => job.tasks[task].pid = Some(pid),
        Transition::TaskEnded {
            task,
            exit,
            ended_ms,
            usage,
        } => {
            let t = &mut job.tasks[task];
            t.exit = Some(exit);
            if ended_ms.is_some() {
                t.ended_ms = ended_ms;
            }
            if let Some(u) = usage {
                t.usage = Some(match t.usage {
                    Some(before) => TaskUsage {
                        cpu_ms: before.cpu_ms + u.cpu_ms,
                        memory_peak_mib: before.memory_peak_mib.max(u.memory_peak_mib),
                        oom_killed: u.oom_killed,
                    },
                    None => u,
                });
            }
        }
        Transition::ServiceBackOff { until_ms } => job.restart_at_ms = Some(until_ms),
        Transition::ServiceRelaunched { at_ms } => {
            job.restart_at_ms = None;
            job.restarts += 1;
            for t in &mut job.tasks {
                t.exit = None;
                t.pid = None;
                t.started_ms = Some(at_ms);
                t.ended_ms = None;
            }
        }
        Transition::StopRequested(cause) => {
            if replaces(&cause, job.stopping.as_ref()) {
                job.stopping = Some(cause);
            }
        }
        Transition::Warned => job.warned = true,
        Transition::SignalScheduled(due) => job.signal_due = Some(due),
        Transition::DueSignalSent => job.signal_due = None,
        Transition::Requeued { reason } => {
            back_to_pending(job, reason);
            job.requeues += 1;
            job.end_ms = None;
            job.exit_code = None;
            job.warned = false;
        }
        Transition::Unlaunched { reason } => {
            back_to_pending(job, reason);
            job.tasks.clear();
        }
        Transition::Finished {
            state,
            end_reason,
            exit_code,
            end_ms,
            reason,
        } => {
            job.state = state;
            job.stopping = None;
            job.signal_due = None;
            job.restart_at_ms = None;
            job.exit_code = Some(exit_code);
            job.end_ms = Some(end_ms);
            job.end_reason = Some(end_reason);
            if reason.is_some() {
                job.reason = reason;
            }
        }
        Transition::Held { by, role } => {
            job.held_by = Some(by);
            job.held_role = Some(role);
        }
        Transition::Released => {
            job.held_by = None;
            job.held_role = None;
        }
        Transition::Updated(spec) => job.spec = *spec,
        Transition::CancelledPending {
            end_reason,
            reason,
            at_ms,
        } => {
            job.state = JobState::Cancelled;
            job.end_ms = Some(at_ms);
            job.end_reason = Some(end_reason);
            job.reason = Some(reason);
        }
    }
    Ok(())
}

/// Applies `t`, or logs why it was refused; whether it was applied. The callers check what
/// they act on beforehand, so a refusal is a bug caught here rather than a corrupt record.
pub(crate) fn apply_or_log(job: &mut JobRecord, t: Transition) -> bool {
    match apply(job, t) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("refused a job transition: {e}");
            false
        }
    }
}

fn back_to_pending(job: &mut JobRecord, reason: ReasonView) {
    job.state = JobState::Pending;
    job.start_ms = None;
    job.stopping = None;
    job.signal_due = None;
    job.reason = Some(reason);
}

/// Why `t` may not be applied to `job` now, if it may not.
fn check(job: &JobRecord, t: &Transition) -> Result<(), &'static str> {
    let running = job.state == JobState::Running;
    let all_ended = job.tasks.iter().all(|t| t.exit.is_some());
    let task_of_run = |task: usize| -> Result<&TaskRecord, &'static str> {
        if !running {
            return Err("only a running job's tasks change");
        }
        job.tasks.get(task).ok_or("the run has no such task")
    };
    let ok_if = |cond: bool, why| if cond { Ok(()) } else { Err(why) };
    match t {
        Transition::Started(run) => {
            ok_if(job.state == JobState::Pending, "only a pending job starts")?;
            ok_if(job.held_by.is_none(), "a held job does not start")?;
            ok_if(!run.tasks.is_empty(), "a run has at least one task")
        }
        Transition::StartUndone { before, .. } => {
            ok_if(running, "only a start is undone")?;
            ok_if(
                before.id == job.id && before.state == JobState::Pending,
                "the job goes back to what it was while pending",
            )
        }
        Transition::TaskLaunched { task, pid } => {
            let t = task_of_run(*task)?;
            ok_if(t.exit.is_none(), "the task already ended")?;
            ok_if(
                t.pid.is_none_or(|p| p == *pid),
                "the task already runs as another process",
            )
        }
        Transition::TaskEnded { task, .. } => {
            ok_if(task_of_run(*task)?.exit.is_none(), "the task already ended")
        }
        Transition::ServiceBackOff { .. } | Transition::ServiceRelaunched { .. } => {
            ok_if(running, "only a running service is relaunched")?;
            ok_if(
                all_ended,
                "a service is relaunched once all its tasks ended",
            )
        }
        Transition::StopRequested(_)
        | Transition::Warned
        | Transition::SignalScheduled(_)
        | Transition::DueSignalSent => ok_if(running, "only a running job is stopped or warned"),
        Transition::Requeued { .. } => {
            ok_if(running, "only a run is requeued")?;
            ok_if(all_ended, "a run is requeued once all its tasks ended")
        }
        Transition::Unlaunched { .. } => {
            ok_if(running, "only a run is forgotten")?;
            ok_if(
                job.tasks
                    .iter()
                    .all(|t| t.pid.is_none() && t.exit.is_none()),
                "a run with a launched or ended task is not forgotten",
            )
        }
        Transition::Finished { state, .. } => {
            ok_if(running, "only a running job finishes")?;
            ok_if(state.is_terminal(), "a job finishes in a terminal state")?;
            ok_if(all_ended, "a job finishes once all its tasks ended")
        }
        Transition::CancelledPending { .. } => ok_if(
            job.state == JobState::Pending,
            "only a pending job is cancelled at once",
        ),
        Transition::Held { .. } | Transition::Updated(_) => ok_if(
            job.state == JobState::Pending,
            "only a pending job is held or updated",
        ),
        Transition::Released => {
            ok_if(
                job.state == JobState::Pending,
                "only a pending job is released",
            )?;
            ok_if(job.held_by.is_some(), "the job is not held")
        }
    }
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;

/// A pending reason the host itself gives (not a plugin's): stage and plugin `host`.
pub(crate) fn host_reason(code: ReasonCode, message: String) -> ReasonView {
    ReasonView {
        stage: "host".into(),
        code,
        message,
        plugin: "host".into(),
        cycle: 0,
        priority_note: None,
    }
}
