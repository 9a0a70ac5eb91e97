//! What a replicated service's owner decides at each reconcile, as a Kubernetes Deployment
//! controller does: in the steady state, make the replicas missing and drain the extra
//! ones (pending first, then the replica whose node has the fewest GPUs in use, so that
//! stopping it frees the most); during a rolling update, make replicas of the new revision
//! up to `wanted + max_surge` in all and drain old ones while at least
//! `wanted - max_unavailable` stay ready; roll back by itself when the new revision is not
//! ready within `progress_deadline_s`. Also the changes that start a rollout (`update`,
//! `rollback`) and the autoscaler's and the endpoint's changes of the replica count.
//!
//! Owns: those rules and the revision history. Does not own the records' storage, the
//! view of the job table or draining (`service_sets.rs`), nor the autoscaler's readings
//! (`host/server/src/service_autoscaler/`).

use super::service_sets::{Replica, ServiceError};
use super::{Scheduler, lock, now_ms};
use crate::submitter::Submitter;
use gantry_api::model::{
    Revision, RolloutState, RolloutStatus, ScaleSample, ServiceRecord, UpdateRequest,
};

/// Revisions kept in a service's history.
const HISTORY_KEPT: usize = 10;

/// One reconcile's decision for one service.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Replicas of the current revision to make.
    pub submit: usize,
    /// Replicas to drain: (job, running).
    pub drain: Vec<(u64, bool)>,
    /// The rollout completed.
    pub complete: bool,
}

/// The steady-state and rolling-update rules, on the replicas not already on their way out.
pub(crate) fn plan(service: &ServiceRecord, replicas: &[Replica]) -> Plan {
    let wanted = if service.stopped { 0 } else { service.replicas } as usize;
    let (current, old): (Vec<&Replica>, Vec<&Replica>) = replicas
        .iter()
        .partition(|r| r.revision == service.revision);
    let mut plan = Plan::default();
    if old.is_empty() {
        plan.submit = wanted.saturating_sub(current.len());
        plan.drain = pick_extra(&current, current.len().saturating_sub(wanted));
        let ready = current.iter().filter(|r| r.ready).count();
        plan.complete = ready >= wanted
            && service
                .rollout
                .as_ref()
                .is_some_and(|r| r.state == RolloutState::Progressing);
        return plan;
    }
    let s = service.strategy;
    let max_total = wanted + s.max_surge as usize;
    let min_ready = wanted.saturating_sub(s.max_unavailable as usize);
    let total = current.len() + old.len();
    plan.submit = max_total
        .saturating_sub(total)
        .min(wanted.saturating_sub(current.len()));
    plan.drain = pick_extra(&current, current.len().saturating_sub(wanted));
    let ready = replicas.iter().filter(|r| r.ready).count();
    let mut may_lose = ready.saturating_sub(min_ready);
    // Old replicas that are not ready serve nothing: they go first, whatever the budget.
    let mut old = old;
    old.sort_by_key(|r| (r.ready, std::cmp::Reverse(r.job)));
    for r in old {
        if !r.ready {
            plan.drain.push((r.job, r.running));
        } else if may_lose > 0 {
            may_lose -= 1;
            plan.drain.push((r.job, r.running));
        }
    }
    plan
}

/// The `n` replicas to drain among `replicas`: pending ones (newest first), then those not
/// ready, then the one whose node has the fewest GPUs in use (newest first among equals).
fn pick_extra(replicas: &[&Replica], n: usize) -> Vec<(u64, bool)> {
    let mut order: Vec<&&Replica> = replicas.iter().collect();
    order.sort_by_key(|r| {
        (
            r.running,
            r.ready,
            r.node_gpus_in_use,
            std::cmp::Reverse(r.job),
        )
    });
    order
        .into_iter()
        .take(n)
        .map(|r| (r.job, r.running))
        .collect()
}

impl Scheduler {
    /// Brings `service` toward what it wants (see [`plan`]); writes it back when changed.
    pub(super) fn reconcile_service(&self, mut service: ServiceRecord, replicas: Vec<Replica>) {
        let before = service.clone();
        let draining = self.draining_jobs();
        if service.stopped {
            for r in replicas.iter().filter(|r| !r.stopping) {
                if let Err(e) = self.cancel(r.job) {
                    tracing::warn!(
                        service = service.id,
                        job = r.job,
                        "cannot stop a replica: {e}"
                    );
                }
            }
            return;
        }
        if self.deadline_passed(&service) {
            self.roll_back_by_itself(&mut service, &replicas);
        } else {
            let active: Vec<Replica> = replicas
                .into_iter()
                .filter(|r| !r.stopping && !draining.contains(&r.job))
                .collect();
            let plan = plan(&service, &active);
            for _ in 0..plan.submit {
                match self.submit_replica(&service) {
                    Ok(_) => {
                        service.made += 1;
                        service.last_error = None;
                    }
                    Err(e) => {
                        service.last_error = Some(e.to_string());
                        break;
                    }
                }
            }
            for (job, running) in plan.drain {
                self.drain_replica(service.id, job, running);
            }
            if plan.complete
                && let Some(r) = service.rollout.as_mut()
            {
                r.state = RolloutState::Complete;
                r.ended_ms = Some(now_ms());
                let message = format!("rollout to revision {} complete", r.to);
                self.event_service(service.id, message);
            }
        }
        if service == before {
            return;
        }
        let mut sets = lock(&self.inner.services);
        if let Some(kept) = sets.by_id.get_mut(&service.id) {
            // A scale, stop, update or endpoint port that came meanwhile is kept.
            kept.made = service.made;
            kept.last_error = service.last_error;
            if kept.revision == before.revision {
                kept.rollout = service.rollout;
                kept.revision = service.revision;
                kept.template = service.template;
                kept.history = service.history;
            }
            if let Err(e) = self.inner.store.put_service(kept) {
                tracing::error!(service = kept.id, "cannot write the service: {e}");
            }
        }
    }

    fn deadline_passed(&self, service: &ServiceRecord) -> bool {
        service.rollout.as_ref().is_some_and(|r| {
            r.state == RolloutState::Progressing
                && r.to == service.revision
                && now_ms().saturating_sub(r.started_ms)
                    > u64::from(service.strategy.progress_deadline_s) * 1000
        })
    }

    /// The new revision was not ready in time: the one before is current again (its
    /// replicas count as current at once; the new ones are drained by the next reconcile).
    fn roll_back_by_itself(&self, service: &mut ServiceRecord, replicas: &[Replica]) {
        let Some(rollout) = service.rollout.as_mut() else {
            return;
        };
        let Some(back) = service
            .history
            .iter()
            .find(|h| h.revision == rollout.from)
            .cloned()
        else {
            service.last_error = Some(format!(
                "revision {} is not ready in time and revision {} is no longer kept",
                rollout.to, rollout.from
            ));
            rollout.state = RolloutState::Complete;
            return;
        };
        let new: Vec<&Replica> = replicas
            .iter()
            .filter(|r| r.revision == rollout.to)
            .collect();
        let ready = new.iter().filter(|r| r.ready).count();
        let why = format!(
            "{ready} of {} replica(s) of revision {} ready after {} s",
            service.replicas, rollout.to, service.strategy.progress_deadline_s
        );
        rollout.state = RolloutState::RolledBack;
        rollout.ended_ms = Some(now_ms());
        let to = rollout.to;
        if let Some(h) = service.history.iter_mut().find(|h| h.revision == to) {
            h.rolled_back = Some(why.clone());
        }
        service.revision = back.revision;
        service.template = back.template;
        let message = format!("rolled back from revision {to} to {}: {why}", back.revision);
        self.event_service(service.id, message);
        self.wake();
    }

    /// Changes service `id` (`POST /v1/services/{id}/update`): a new image, command or
    /// environment makes a new revision, rolled out by the next reconciles.
    pub(crate) fn update_service(
        &self,
        id: u64,
        request: UpdateRequest,
    ) -> Result<ServiceRecord, ServiceError> {
        let current = self.service(id).ok_or(ServiceError::NotFound(id))?;
        if current.stopped {
            return Err(ServiceError::Stopped(id));
        }
        let (template, change) = updated_template(&current, &request);
        if !change.is_empty() {
            let mut probe = template.clone();
            probe.labels.remove(super::service_sets::SERVICE_LABEL);
            probe.validate().map_err(super::jobs::SubmitError::Field)?;
            self.check_image(&probe)?;
            self.check_runnable_user(&probe)?;
        }
        let mut message = Vec::new();
        {
            let mut sets = lock(&self.inner.services);
            let service = sets.by_id.get_mut(&id).ok_or(ServiceError::NotFound(id))?;
            if let Some(r) = request.rollout {
                service.strategy = r;
                message.push("rollout strategy set".to_string());
            }
            if request.no_autoscale {
                service.autoscale = None;
                message.push("autoscaling removed".to_string());
            }
            if let Some(a) = request.autoscale {
                service.replicas = service.replicas.clamp(a.min_replicas, a.max_replicas);
                message.push(format!(
                    "autoscaling {}..{} on {} (target {} per replica)",
                    a.min_replicas, a.max_replicas, a.metric, a.target
                ));
                service.autoscale = Some(a);
            }
            if !change.is_empty() {
                let revision = service.last_revision.max(service.revision) + 1;
                start_rollout(service, revision, template, change.clone());
                message.push(format!("revision {revision} ({change}) rolling out"));
            }
            self.inner.store.put_service(service)?;
        }
        if !message.is_empty() {
            self.event_service(id, format!("updated: {}", message.join("; ")));
        }
        self.wake();
        self.service(id).ok_or(ServiceError::NotFound(id))
    }

    /// Makes revision `to` (default: the one before the current one) current again
    /// (`POST /v1/services/{id}/rollback`), rolled out as an update is.
    pub(crate) fn rollback_service(
        &self,
        id: u64,
        to: Option<u32>,
    ) -> Result<ServiceRecord, ServiceError> {
        let message = {
            let mut sets = lock(&self.inner.services);
            let service = sets.by_id.get_mut(&id).ok_or(ServiceError::NotFound(id))?;
            if service.stopped {
                return Err(ServiceError::Stopped(id));
            }
            let target = match to {
                Some(n) => service.history.iter().find(|h| h.revision == n),
                None => service
                    .history
                    .iter()
                    .rev()
                    .skip_while(|h| h.revision != service.revision)
                    .nth(1),
            }
            .cloned()
            .ok_or_else(|| {
                ServiceError::NoRevision(match to {
                    Some(n) => format!("service {id} keeps no revision {n}"),
                    None => format!("service {id} has no revision before {}", service.revision),
                })
            })?;
            if target.revision == service.revision {
                return Err(ServiceError::NoRevision(format!(
                    "revision {} is the current one",
                    target.revision
                )));
            }
            let from = service.revision;
            service.rollout = Some(RolloutStatus {
                from,
                to: target.revision,
                started_ms: now_ms(),
                state: RolloutState::Progressing,
                ended_ms: None,
            });
            service.revision = target.revision;
            service.template = target.template;
            self.inner.store.put_service(service)?;
            format!("rollback from revision {from} to {}", target.revision)
        };
        self.event_service(id, message);
        self.wake();
        self.service(id).ok_or(ServiceError::NotFound(id))
    }

    /// The autoscaler's decision for service `id`: `replicas` wanted, for `why`; the
    /// reading is kept either way.
    pub(crate) fn autoscale_service(&self, id: u64, replicas: u32, why: &str, sample: ScaleSample) {
        self.record_scale_sample(id, sample);
        let changed = {
            let mut sets = lock(&self.inner.services);
            match sets.by_id.get_mut(&id) {
                Some(s) if !s.stopped && s.autoscale.is_some() && s.replicas != replicas => {
                    let from = s.replicas;
                    s.replicas = replicas;
                    if let Err(e) = self.inner.store.put_service(s) {
                        tracing::error!(service = id, "cannot write the service: {e}");
                    }
                    Some(from)
                }
                _ => None,
            }
        };
        if let Some(from) = changed {
            self.event_service(id, format!("autoscaled {from} → {replicas}: {why}"));
            self.wake();
        }
    }

    /// A request reached service `id`'s endpoint while it had no replica: one is started
    /// when it is scaled to zero by its autoscaler. True when the service may get one.
    pub(crate) fn activate_service(&self, id: u64) -> bool {
        let woken = {
            let mut sets = lock(&self.inner.services);
            match sets.by_id.get_mut(&id) {
                Some(s) if s.stopped => return false,
                Some(s) if s.replicas == 0 && s.autoscale.is_some() => {
                    s.replicas = 1;
                    if let Err(e) = self.inner.store.put_service(s) {
                        tracing::error!(service = id, "cannot write the service: {e}");
                    }
                    true
                }
                Some(s) => return s.replicas > 0,
                None => return false,
            }
        };
        if woken {
            self.event_service(id, "autoscaled 0 → 1: a request arrived".into());
            self.wake();
        }
        true
    }

    /// Who a service's replicas are submitted as.
    pub(super) fn replica_submitter(service: &ServiceRecord) -> Submitter {
        if service.privileged {
            Submitter::Privileged
        } else {
            Submitter::User
        }
    }
}

/// `service`'s template with `request` applied, and what changed (empty: nothing).
fn updated_template(
    service: &ServiceRecord,
    request: &UpdateRequest,
) -> (gantry_api::model::JobSpec, String) {
    let mut t = service.template.clone();
    let mut change = Vec::new();
    if let Some(image) = &request.image {
        let image = (!image.is_empty()).then(|| image.clone());
        if t.image != image {
            change.push(format!("image={}", image.as_deref().unwrap_or("(host)")));
            t.image = image;
        }
    }
    if let Some(argv) = &request.argv
        && &t.argv != argv
    {
        t.argv = argv.clone();
        change.push("argv".into());
    }
    for (key, value) in &request.env {
        let before = t.env.get(key).cloned();
        match value {
            Some(v) => {
                t.env.insert(key.clone(), v.clone());
            }
            None => {
                t.env.remove(key);
            }
        }
        if t.env.get(key) != before.as_ref() {
            change.push(format!("env {key}"));
        }
    }
    (t, change.join(", "))
}

/// Makes `revision` (from `template`) current and records it; older revisions beyond
/// [`HISTORY_KEPT`] are forgotten.
fn start_rollout(
    service: &mut ServiceRecord,
    revision: u32,
    template: gantry_api::model::JobSpec,
    change: String,
) {
    service.rollout = Some(RolloutStatus {
        from: service.revision,
        to: revision,
        started_ms: now_ms(),
        state: RolloutState::Progressing,
        ended_ms: None,
    });
    service.history.push(Revision {
        revision,
        template: template.clone(),
        created_ms: now_ms(),
        change,
        rolled_back: None,
    });
    let keep_from = service.revision;
    while service.history.len() > HISTORY_KEPT {
        match service.history.iter().position(|h| h.revision != keep_from) {
            Some(i) => {
                service.history.remove(i);
            }
            None => break,
        }
    }
    service.last_revision = revision;
    service.revision = revision;
    service.template = template;
}

#[cfg(test)]
#[path = "service_rollout_tests.rs"]
mod tests;
