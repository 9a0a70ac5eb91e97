//! What a user changes of a pending job, as SLURM's `scontrol hold`, `release` and `update`
//! do: holding it out of every cycle, releasing it, and changing its time limit or its
//! dependencies.
//!
//! Owns: these requests, their checks and their events. Does not own applying them
//! (`transition.rs`), who may ask (the API checks that the caller owns the job), nor the
//! holds a cycle computes from dependencies and array limits (`holds.rs`, which also turns a
//! user's hold into the job's pending reason).

use super::jobs::SubmitError;
use super::transition::{self, Transition};
use super::{Scheduler, lock};
use crate::job_options::Dependency;
use crate::model::{FieldError, JobRecord, JobState};
use crate::store::StoreError;

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
    /// A release of a job that is not held.
    #[error("job {0} is not held")]
    NotHeld(u64),
    /// A field of an update is invalid.
    #[error("{}: {}", .0.field, .0.message)]
    Field(FieldError),
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
    /// Holds pending job `id` (`by` names who asked): it stays pending until released.
    /// Holding a held job again is accepted and changes nothing.
    pub fn hold(&self, id: u64, by: &str) -> Result<JobRecord, ControlError> {
        self.control(id, "held", |job| {
            if job.held_by.is_some() {
                return Ok(None);
            }
            Ok(Some(Transition::Held { by: by.to_string() }))
        })
    }

    /// Releases held pending job `id`.
    pub fn release(&self, id: u64) -> Result<JobRecord, ControlError> {
        self.control(id, "released", |job| {
            if job.held_by.is_none() {
                return Err(ControlError::NotHeld(job.id));
            }
            Ok(Some(Transition::Released))
        })
    }

    /// Changes the time limit or dependencies of pending job `id`, checked as a submit
    /// checks them. A job may depend only on jobs submitted before it, so an update cannot
    /// make two jobs wait for each other.
    pub fn update(&self, id: u64, update: JobUpdate) -> Result<JobRecord, ControlError> {
        let current = self.job(id).ok_or(ControlError::NotFound(id))?;
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
        self.limit_interactive(&mut spec).map_err(refused)?;
        self.control(id, "updated", |job| {
            if job.spec == spec {
                return Ok(None);
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
        let Some(job) = st.jobs.get_mut(id) else {
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
        let Some(change) = decide(job)? else {
            return Ok(job.clone());
        };
        let message = match &change {
            Transition::Held { by } => format!("held by {by}"),
            Transition::Updated(spec) => format!(
                "time limit {} s, dependencies {:?}",
                spec.time_limit_s, spec.dependencies
            ),
            _ => String::new(),
        };
        if !transition::apply_or_log(job, change) {
            return Err(ControlError::NotPending {
                id,
                state: job.state.as_str(),
                what,
            });
        }
        let snapshot = job.clone();
        drop(st);
        self.inner.store.put_job(&snapshot)?;
        self.inner.store.flush()?;
        self.event(id, what, message);
        self.wake();
        Ok(snapshot)
    }
}
