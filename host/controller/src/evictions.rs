//! Evicting a running job for a blocked one (a preemption plugin's answer, already
//! checked by the engine): the warning first (the job's reason, which `gantry run` prints
//! at its terminal, and an event), then its checkpoint signal (`--signal`, else SIGTERM),
//! at once or `warn_s` later (contract 0.3's `eviction.warn-s`: the record keeps the signal
//! due, so a controller that takes over sends it), then SIGKILL after the grace.
//!
//! Owns: those steps. Does not own choosing victims (plugins, the engine's validator) or
//! the job's end (`lifecycle.rs`).

use super::job_edit::Annotation;
use super::transition::Transition;
use super::{Scheduler, State, now_ms};
use gantry_api::model::{DueSignal, JobState, ReasonView, StopCause};
use gantry_contract::Eviction;
use std::time::Duration;

impl Scheduler {
    /// Asks the job `ev` names to stop: warned now, signalled now or when due.
    pub(crate) fn evict(&self, st: &mut State, ev: &Eviction, cycle: u64) {
        let Some(mut job) = st.jobs.edit(ev.job) else {
            return;
        };
        if job.state != JobState::Running || job.stopping.is_some() {
            return;
        }
        job.apply_or_log(Transition::StopRequested(StopCause::Evicted {
            for_job: ev.for_job,
        }));
        let when = if ev.warn_s == 0 {
            "checkpoint signal now".to_string()
        } else {
            format!("checkpoint signal in {} s", ev.warn_s)
        };
        // The warning: `gantry run` prints a running job's reason as a notice
        // (`api/attach.rs`), and the job's end keeps it.
        job.annotate(Annotation::Reason(ReasonView {
            stage: "preemption".into(),
            code: ev.reason.code,
            message: format!(
                "to be stopped in {} s ({when}): {}",
                u64::from(ev.warn_s) + u64::from(ev.grace_s),
                ev.reason.message
            ),
            plugin: String::new(),
            cycle,
            priority_note: None,
        }));
        super::job_trace::job_event(job.id, "evicted", cycle, &ev.reason.message);
        // The job's own warning signal (so it can checkpoint), SIGKILL after the grace.
        let signal = job
            .spec
            .signal
            .as_ref()
            .and_then(|w| w.number().ok())
            .unwrap_or(libc::SIGTERM);
        if ev.warn_s == 0 {
            self.stop_tasks_with(&job, signal, Duration::from_secs(u64::from(ev.grace_s)));
        } else {
            job.apply_or_log(Transition::SignalScheduled(DueSignal {
                at_ms: now_ms() + u64::from(ev.warn_s) * 1000,
                signal,
                grace_s: ev.grace_s,
            }));
        }
        drop(job);
        self.event(
            ev.job,
            "evicted",
            format!(
                "for job {}: {} ({when}, grace {} s)",
                ev.for_job, ev.reason.message, ev.grace_s
            ),
        );
    }

    /// Sends the checkpoint signals that came due: for each evicted job warned earlier whose
    /// `signal_due` has passed, the signal, and SIGKILL after its grace.
    pub(crate) fn send_due_signals(&self) {
        let now = now_ms();
        let mut st = super::lock(&self.inner.state);
        for mut job in st.jobs.edit_running() {
            let Some(due) = job.signal_due.filter(|d| now >= d.at_ms) else {
                continue;
            };
            job.apply_or_log(Transition::DueSignalSent);
            // A stop for another cause since (a cancel) signalled the job already.
            if matches!(job.stopping, Some(StopCause::Evicted { .. })) {
                let grace = Duration::from_secs(u64::from(due.grace_s));
                self.stop_tasks_with(&job, due.signal, grace);
                self.event(
                    job.id,
                    "signal",
                    format!(
                        "checkpoint signal {} sent after the warning; SIGKILL in {} s",
                        due.signal, due.grace_s
                    ),
                );
            }
            job.write_or_log();
        }
    }
}
