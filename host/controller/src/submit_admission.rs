//! Submit-time admission, shared by a new job and by every change to a pending one: "could
//! it ever fit" on the cluster's nodes (`gantry_engine::fits_empty_cluster`), then the
//! pipeline's `admission.check-submit` (a plugin such as `queue-limits` rejects a time
//! limit above its queue's `max_time_limit_s`, or patches the job), then the checks a
//! patch needs again (`JobSpec::validate`, a user's tier against its queue's
//! `limits.max_user_tier` when the policy did not set the tier itself).
//!
//! `gantry update` (`job_control.rs`) passes the changed spec through the same function as
//! `POST /v1/jobs` (`jobs.rs`), so no change to a pending job skips a limit a submit
//! would meet (issue 43, finding 11).
//!
//! Owns: the order of these checks and what the plugins are shown (the job once, as it
//! would be). Does not own the checks themselves (engine, plugins, `submit_limits.rs`),
//! nor the other submit checks (image, user, size, pending count: `jobs.rs`).

use super::jobs::SubmitError;
use super::{Scheduler, lock, now_ms, snapshot};
use crate::submitter::Submitter;
use gantry_api::model::{JobRecord, JobSpec};
use gantry_engine::{Interner, SubmitDecision, fits_empty_cluster};

/// Applies an admission plugin's patch to `spec`.
fn apply_patch(spec: &mut JobSpec, p: gantry_contract::JobPatch) {
    if let Some(q) = p.queue {
        spec.queue = q;
    }
    if let Some(t) = p.tier {
        spec.tier = t;
    }
    if let Some(t) = p.time_limit_s {
        spec.time_limit_s = t;
    }
    if let Some(pr) = p.preemptible {
        spec.preemptible = pr;
    }
    spec.labels.extend(p.labels);
}

impl Scheduler {
    /// Runs submit-time admission on `spec`, applying the patches the policy returns.
    /// `current` is the pending job `spec` would replace (an update), `None` for a new job:
    /// the plugins then see that job once, as it would be after the change, and not also
    /// as it is now.
    pub(super) fn admit_at_submit(
        &self,
        spec: &mut JobSpec,
        submitter: Submitter,
        current: Option<&JobRecord>,
    ) -> Result<(), SubmitError> {
        let probe = match current {
            Some(job) => {
                let mut probe = job.clone();
                probe.spec = spec.clone();
                probe
            }
            None => JobRecord::new(0, spec.clone(), now_ms()),
        };
        let replaced = current.map(|j| j.id);
        let (ctx, nodes, job) = {
            let st = lock(&self.inner.state);
            let running: Vec<&JobRecord> = st
                .jobs
                .running()
                .filter(|j| Some(j.id) != replaced)
                .chain(std::iter::once(&probe))
                .collect();
            let members = lock(&self.inner.members);
            // Every node the cluster knows counts for "could it ever fit", up or not.
            let nodes: Vec<_> = members.all().map(|(id, m)| (id, &m.info)).collect();
            // The context and nodes only: converting every pending and running job, as a
            // cycle does, would make each submit cost as much as the backlog.
            let (mut ctx, nodes, models) = snapshot::submit_context(
                running.iter().copied(),
                st.jobs
                    .active()
                    .filter(|j| Some(j.id) != replaced)
                    .chain(std::iter::once(&probe)),
                &nodes,
                st.cycle,
                now_ms(),
                &self.ledger(),
            );
            let mut strings = Interner::new();
            for s in &ctx.strings {
                strings.intern(s);
            }
            let job = snapshot::contract_job(&probe, &models, &mut strings);
            ctx.strings = strings.into_strings();
            (ctx, nodes, job)
        };
        fits_empty_cluster(&ctx, &nodes, &job)
            .map_err(|r| SubmitError::Unsatisfiable(r.message))?;
        let (decision, faults) = { lock(&self.inner.policy).check_submit(&ctx, &job) };
        if !faults.is_empty() {
            lock(&self.inner.faults).record(0, &faults, &self.inner.store);
        }
        match decision {
            SubmitDecision::Reject { plugin, message } => {
                Err(SubmitError::Rejected { plugin, message })
            }
            SubmitDecision::Accept(patches) if !patches.is_empty() => {
                // A tier the policy sets is its decision; one it leaves is the user's,
                // checked again against the queue the policy may have moved the job to.
                let policy_sets_tier = patches.iter().any(|p| p.tier.is_some());
                for p in patches {
                    apply_patch(spec, p);
                }
                spec.validate().map_err(SubmitError::Field)?;
                if !policy_sets_tier {
                    self.check_tier(spec, submitter)?;
                }
                Ok(())
            }
            SubmitDecision::Accept(_) => Ok(()),
        }
    }
}
