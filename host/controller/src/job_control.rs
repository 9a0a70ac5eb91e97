//! What a user changes of a pending job, as SLURM's `scontrol hold`, `release` and `update`
//! do: holding it out of every cycle, releasing it, and changing its time limit or its
//! dependencies.
//!
//! A hold carries who set it and their role: an operator's or admin's hold is lifted only
//! by an operator or admin, never by the job's owner (issue 43, finding 12). An update goes
//! back through submit-time admission (`submit_admission.rs`: a queue's
//! `max_time_limit_s` and whatever else a submit meets; finding 11).
//!
//! Owns: these requests, their checks and their events. Does not own applying them
//! (`transition.rs`), who may ask (the API checks that the caller owns the job), nor the
//! holds a cycle computes from dependencies and array limits (`holds.rs`, which also turns a
//! user's hold into the job's pending reason).

use super::jobs::SubmitError;
use super::transition::Transition;
use super::{Scheduler, lock};
use crate::submitter::Submitter;
use gantry_api::model::job_options::Dependency;
use gantry_api::model::{FieldError, HoldRole, JobRecord, JobState};
use gantry_store::StoreError;

/// Why a hold, release or update was refused.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No such job.
    #[error("job {0} does not exist")]
    NotFound(u64),
    /// The job is not pending (it runs or ended).
    #[error("job {id} is {state}: only a pending job can be {what}")]
    NotPending {
        /// The job.
        id: u64,
        /// Its state.
        state: &'static str,
        /// What was asked (`held`, `released`, `updated`).
        what: &'static str,
    },
    /// A requeue of a job that is not running.
    #[error("job {id} is {state}: only a running job can be requeued")]
    NotRunning {
        /// The job.
        id: u64,
        /// Its state.
        state: &'static str,
    },
    /// A release of a job that is not held.
    #[error("job {0} is not held")]
    NotHeld(u64),
    /// A field of an update is invalid.
    #[error("{}: {}", .0.field, .0.message)]
    Field(FieldError),
    /// An operator or admin held the job, and a user asked to release it.
    #[error(
        "job {id} was held by {by} ({}): only an operator or admin may release it; ask them",
        .role.as_str()
    )]
    HeldByOperator {
        /// The job.
        id: u64,
        /// Who held it.
        by: String,
        /// Their role.
        role: HoldRole,
    },
    /// Submit-time admission refused the changed job (`field` names what the update
    /// changed, for a refusal that names no field of its own).
    #[error("{field}: {error}")]
    Refused {
        /// The updated field.
        field: String,
        /// The refusal, as a submit gets it.
        error: SubmitError,
    },
    /// The store failed; nothing changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What `gantry update` changes of a pending job; fields left out stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobUpdate {
    /// The new time limit in seconds (0: none), as at submit.
    pub time_limit_s: Option<u64>,
    /// The new dependencies, replacing the old ones (empty: none).
    pub dependencies: Option<Vec<Dependency>>,
}

impl Scheduler {
    /// Holds pending job `id` (`by` names who asked, `role` their role): it stays pending
    /// until released. Holding a held job again changes nothing, unless an operator or
    /// admin holds a job its owner held: the hold becomes theirs, so the owner cannot lift
    /// it.
    pub(crate) fn hold(
        &self,
        id: u64,
        by: &str,
        role: HoldRole,
    ) -> Result<JobRecord, ControlError> {
        self.control(id, "held", |job| {
            if job.held_by.is_some() && held_role(job) >= role {
                return Ok(None);
            }
            Ok(Some(Transition::Held {
                by: by.to_string(),
                role,
            }))
        })
    }

    /// Releases held pending job `id` for a caller of `role`: a hold an operator or admin
    /// set is released only by an operator or admin.
    pub(crate) fn release(&self, id: u64, role: HoldRole) -> Result<JobRecord, ControlError> {
        self.control(id, "released", |job| {
            let Some(by) = &job.held_by else {
                return Err(ControlError::NotHeld(job.id));
            };
            let held = held_role(job);
            if held.is_privileged() && !role.is_privileged() {
                return Err(ControlError::HeldByOperator {
                    id: job.id,
                    by: by.clone(),
                    role: held,
                });
            }
            Ok(Some(Transition::Released))
        })
    }

    /// Changes the time limit or dependencies of pending job `id`, checked as a submit
    /// checks them. A job may depend only on jobs submitted before it, so an update cannot
    /// make two jobs wait for each other.
    /// Then the changed job goes through submit-time admission as a new one would
    /// (`submitter` is the caller's trust, as at submit): a refusal names the changed field.
    pub(crate) fn update(
        &self,
        id: u64,
        update: JobUpdate,
        submitter: Submitter,
    ) -> Result<JobRecord, ControlError> {
        let current = self.job(id).ok_or(ControlError::NotFound(id))?;
        if current.state != JobState::Pending {
            return Err(ControlError::NotPending {
                id,
                state: current.state.as_str(),
                what: "updated",
            });
        }
        let changed = if update.time_limit_s.is_some() {
            "time_limit_s"
        } else {
            "dependencies"
        };
        let mut spec = current.spec.clone();
        if let Some(limit) = update.time_limit_s {
            spec.time_limit_s = limit;
        }
        if let Some(deps) = update.dependencies {
            if let Some((i, d)) = deps.iter().enumerate().find(|(_, d)| d.job >= id) {
                return Err(ControlError::Field(FieldError {
                    field: format!("dependencies[{i}].job"),
                    message: format!(
                        "job {id} may depend only on jobs submitted before it; {} is not",
                        d.job
                    ),
                }));
            }
            spec.dependencies = deps;
        }
        let refused = |e: SubmitError| match e {
            SubmitError::Field(f) => ControlError::Field(f),
            SubmitError::Store(e) => ControlError::Store(e),
            other => ControlError::Field(FieldError {
                field: "update".into(),
                message: other.to_string(),
            }),
        };
        spec.validate().map_err(ControlError::Field)?;
        self.check_dependencies(&spec).map_err(refused)?;
        self.admit_at_submit(&mut spec, submitter, Some(&current))
            .map_err(|error| match error {
                SubmitError::Store(e) => ControlError::Store(e),
                error => ControlError::Refused {
                    field: changed.to_string(),
                    error,
                },
            })?;
        self.limit_interactive(&mut spec).map_err(refused)?;
        self.control(id, "updated", |job| {
            if job.spec == spec {
                return Ok(None);
            }
            // The job changed meanwhile (another update): admission saw another spec.
            if job.spec != current.spec {
                return Err(ControlError::Field(FieldError {
                    field: changed.to_string(),
                    message: format!("job {id} changed while this update was checked: try again"),
                }));
            }
            Ok(Some(Transition::Updated(Box::new(spec.clone()))))
        })
    }

    /// Applies what `decide` returns to pending job `id`, durably, with an event; `what`
    /// names the change (`held`, `released`, `updated`). `decide` returning `None` changes
    /// nothing and answers the job as it is.
    fn control(
        &self,
        id: u64,
        what: &'static str,
        decide: impl FnOnce(&JobRecord) -> Result<Option<Transition>, ControlError>,
    ) -> Result<JobRecord, ControlError> {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(id) else {
            return Err(match st.jobs.find(id)? {
                Some(j) => ControlError::NotPending {
                    id,
                    state: j.state.as_str(),
                    what,
                },
                None => ControlError::NotFound(id),
            });
        };
        if job.state != JobState::Pending {
            return Err(ControlError::NotPending {
                id,
                state: job.state.as_str(),
                what,
            });
        }
        let Some(change) = decide(&job)? else {
            return Ok(job.record().clone());
        };
        let message = match &change {
            Transition::Held { by, role } => format!("held by {by} ({})", role.as_str()),
            Transition::Updated(spec) => format!(
                "time limit {} s, dependencies {:?}",
                spec.time_limit_s, spec.dependencies
            ),
            _ => String::new(),
        };
        if !job.apply_or_log(change) {
            return Err(ControlError::NotPending {
                id,
                state: job.state.as_str(),
                what,
            });
        }
        let snapshot = job.record().clone();
        job.write()?;
        drop(st);
        self.inner.store.flush()?;
        self.event(id, what, message);
        self.wake();
        Ok(snapshot)
    }
}

/// The role of whoever held `job`; a hold recorded before holds carried it is its owner's.
fn held_role(job: &JobRecord) -> HoldRole {
    job.held_role.unwrap_or(HoldRole::User)
}
