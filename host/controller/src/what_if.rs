//! What-ifs: when would a job that is not submitted start (`gantry submit --test-only`, as
//! `sbatch --test-only`), or a variant of a pending job (`gantry job ID --what-if --gpus 2`)?
//! The job is checked as at submit (its fields, its dependencies, an interactive job's time
//! limit) but not stored; it joins a copy of the snapshot last offered to the forecaster
//! (in place of the pending job it varies), a pipeline built from the live spec orders the
//! queue as a cycle would (a faulting stage falls back to the default, and the answer says
//! so), and the forecast replays it (`forecasts.rs`). A shape no node could hold answers
//! "never: ..." rather than an error; nothing here touches the live pipeline, the job
//! table or the store. What-ifs run one at a time (a 429 while one runs).
//!
//! Owns: the what-if. Does not own the forecast, the checks (`jobs.rs`) or the pipeline's
//! building (`gantry_policy::Registry`).

use super::jobs::{SubmitError, field_error};
use super::snapshot::{Models, contract_job};
use super::{Scheduler, lock, now_ms};
use gantry_api::model::{JobRecord, JobSpec, JobState, StartForecast};
use gantry_engine::{Interner, run_cycle};

/// The id the hypothetical job has in the copy (no real job has it).
const WHAT_IF_ID: u64 = u64::MAX - 1;

impl Scheduler {
    /// When a job of `spec` would start, in place of the pending job `replaces` if given.
    pub(crate) fn what_if(
        &self,
        mut spec: JobSpec,
        replaces: Option<u64>,
    ) -> Result<StartForecast, SubmitError> {
        // One what-if at a time: each builds a pipeline and copies the queue, and another
        // user firing them in a loop must not make the daemon do that in parallel.
        let _one = match self.inner.forecaster.what_if_running.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(SubmitError::TooMany(field_error(
                    "forecast",
                    "another what-if is being computed; ask again in a moment",
                )));
            }
        };
        spec.validate().map_err(SubmitError::Field)?;
        self.check_dependencies(&spec)?;
        self.limit_interactive(&mut spec)?;
        if let Some(id) = replaces {
            let pending = self.job(id).is_some_and(|j| j.state == JobState::Pending);
            if !pending {
                return Err(SubmitError::Field(field_error(
                    "replaces",
                    format!("job {id} is not a pending job"),
                )));
            }
        }
        let Some((latest, names)) = self.latest_forecast_input() else {
            return Err(SubmitError::Field(field_error(
                "forecast",
                "no forecast yet: forecasts are off (forecast_every_s = 0) or the daemon just started",
            )));
        };
        let mut record = JobRecord::new(WHAT_IF_ID, spec, now_ms());
        record.spec.array = None;
        let mut snap = (*latest).clone();
        snap.ctx.now_ms = now_ms();
        let mut strings = Interner::new();
        for s in &snap.ctx.strings {
            strings.intern(s);
        }
        let model_names: Vec<String> = snap
            .ctx
            .gpu_models
            .iter()
            .map(|&m| snap.ctx.text(m).to_string())
            .collect();
        let models = Models::with_names(model_names, &record);
        let job = contract_job(&record, &models, &mut strings);
        snap.ctx.strings = strings.into_strings();
        snap.pending.retain(|j| Some(j.id) != replaces);
        snap.pending.push(job);
        // The queue's order as a cycle of the live spec would give it, off the live pipeline.
        let (registry, spec) = {
            let policy = lock(&self.inner.policy);
            (policy.registry().clone(), policy.active().spec.clone())
        };
        let build = |spec: &gantry_policy::PipelineSpec| {
            registry
                .build(spec, Some(&self.inner.store))
                .map(|(p, _)| p)
                .map_err(|e| SubmitError::Field(field_error("policy", e.to_string())))
        };
        let (mut pipeline, mut fallback) = (build(&spec)?, build(&gantry_policy::default_spec())?);
        // As in the daemon: a stage whose plugin faults falls back, and the answer says so.
        let outcome = run_cycle(&snap, &mut pipeline, Some(&mut fallback));
        let faulted = outcome.faults.first().map(|f| {
            format!(
                " (the live {} plugin {} faulted in the what-if: {}; the default decided)",
                f.stage, f.plugin.name, f.fault
            )
        });
        let computed_ms = now_ms();
        if !outcome.order.contains(&WHAT_IF_ID) {
            let why = outcome
                .pending
                .iter()
                .find(|(id, _)| *id == WHAT_IF_ID)
                .map_or_else(|| "admission".to_string(), |(_, r)| r.message.clone());
            return Ok(StartForecast {
                p50_ms: None,
                p90_ms: None,
                reason: format!("not before it is admitted: {why}"),
                computed_ms,
            });
        }
        // Jobs the copy's cycle would start now are not started: the forecast replays them.
        let mut forecasts = self.forecast_described(&snap, &outcome.order, &names);
        let mut f = forecasts.remove(&WHAT_IF_ID).ok_or_else(|| {
            SubmitError::Field(field_error("forecast", "the job was not forecast"))
        })?;
        f.reason.push_str(faulted.as_deref().unwrap_or(""));
        Ok(f)
    }
}
