//! Replicated services (`POST /v1/services`, `gantry service`), as a Kubernetes Deployment
//! keeps pods: the one owner of every service's record and the only code that makes or
//! stops its replicas. A replica is an ordinary service job made from the service's
//! template (`NAME-rN`, label `gantry.service=ID`), submitted as the service's creator was,
//! so it goes through the policy pipeline like any job (a team's quota applies; one that
//! cannot be placed waits with a reason) and restarts in place as any service job does.
//!
//! The job table is the truth about replicas: a service's live replicas are the pending or
//! running jobs of its owner that carry its label (a label no one may set through
//! `POST /v1/jobs`), so a replica submitted just before a crash is found again, not lost.
//! Reconciling runs on the scheduler's loop before every cycle, one at a time (a change
//! through the API only wakes it): a replica job that ended (cancelled, failed to launch,
//! lost with its node) is replaced; while fewer replicas live than wanted, new ones are
//! submitted; while more live, the newest are cancelled, pending ones first. A stopped
//! service cancels its replicas and makes none. A replica that cannot be submitted leaves
//! `last_error` and is tried again at the next cycle.
//!
//! Owns: the records (in memory and in the store's `services` tree) and those rules. Does
//! not own submitting or cancelling a job (`jobs.rs`) nor a replica's restarts and health
//! (`service.rs`).

use super::jobs::SubmitError;
use super::{Scheduler, lock, now_ms};
use crate::auth_submit::Submitter;
use crate::model::{HealthState, JobSpec, JobState, ReplicaView, ServiceRecord, ServiceView};
use gantry_contract::JobKind;
use std::collections::BTreeMap;

/// The label that names a replica's service.
pub const SERVICE_LABEL: &str = "gantry.service";

/// The services, by id.
#[derive(Debug, Default)]
pub(crate) struct ServiceSets {
    by_id: BTreeMap<u64, ServiceRecord>,
}

impl ServiceSets {
    /// The services kept in `store`.
    pub(crate) fn load(store: &crate::store::Store) -> Result<Self, crate::store::StoreError> {
        Ok(Self {
            by_id: store.services()?.into_iter().map(|s| (s.id, s)).collect(),
        })
    }
}

/// Why a service operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The spec is not one of a service, or its replicas are out of range.
    #[error("{0}")]
    Submit(#[from] SubmitError),
    /// No service has this id.
    #[error("no service {0}")]
    NotFound(u64),
    /// It was stopped: it cannot be scaled again.
    #[error("service {0} is stopped")]
    Stopped(u64),
    /// The store could not write it.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl Scheduler {
    /// Creates a service from `spec` (kind `service`, `service.replicas` wanted, 1 when 0)
    /// as `submitter`; its first replicas are submitted at once, each checked as any job.
    pub fn create_service(
        &self,
        mut spec: JobSpec,
        submitter: Submitter,
    ) -> Result<ServiceRecord, ServiceError> {
        if spec.kind != JobKind::Service {
            return Err(SubmitError::Field(super::jobs::field_error(
                "kind",
                "a replicated service is a job of kind `service`",
            ))
            .into());
        }
        if spec.array.is_some() {
            return Err(SubmitError::Field(super::jobs::field_error(
                "array",
                "a service's replicas are not an array",
            ))
            .into());
        }
        spec.validate().map_err(SubmitError::Field)?;
        let service = spec.service.get_or_insert_with(Default::default);
        let replicas = service.replicas.max(1);
        service.replicas = 0;
        let id = self.inner.store.next_id("service")?;
        spec.labels.insert(SERVICE_LABEL.into(), id.to_string());
        let record = ServiceRecord {
            id,
            name: spec.name.clone(),
            template: spec,
            replicas,
            revision: 1,
            made: 0,
            created_ms: now_ms(),
            stopped: false,
            privileged: matches!(submitter, Submitter::Privileged),
            endpoint_port: None,
            last_error: None,
        };
        // The first replica is submitted here, so a spec the pipeline refuses (a queue
        // that does not exist, a job no node could hold) is refused to the caller.
        self.submit_replica(&record)?;
        let mut record = record;
        record.made = 1;
        self.inner.store.put_service(&record)?;
        lock(&self.inner.services).by_id.insert(id, record.clone());
        self.event_service(id, format!("created with {replicas} replica(s)"));
        self.wake();
        Ok(record)
    }

    /// Sets the number of replicas of service `id`.
    pub fn scale_service(&self, id: u64, replicas: u32) -> Result<ServiceRecord, ServiceError> {
        {
            let mut sets = lock(&self.inner.services);
            let service = sets.by_id.get_mut(&id).ok_or(ServiceError::NotFound(id))?;
            if service.stopped {
                return Err(ServiceError::Stopped(id));
            }
            service.replicas = replicas;
            self.inner.store.put_service(service)?;
        }
        self.event_service(id, format!("scaled to {replicas} replica(s)"));
        self.wake();
        self.service(id).ok_or(ServiceError::NotFound(id))
    }

    /// Stops service `id`: its replicas are cancelled and none is made again.
    pub fn stop_service(&self, id: u64) -> Result<ServiceRecord, ServiceError> {
        {
            let mut sets = lock(&self.inner.services);
            let service = sets.by_id.get_mut(&id).ok_or(ServiceError::NotFound(id))?;
            service.stopped = true;
            service.replicas = 0;
            self.inner.store.put_service(service)?;
        }
        self.event_service(id, "stopped".into());
        self.wake();
        self.service(id).ok_or(ServiceError::NotFound(id))
    }

    /// Service `id` as kept.
    pub fn service(&self, id: u64) -> Option<ServiceRecord> {
        lock(&self.inner.services).by_id.get(&id).cloned()
    }

    /// Every service, by id.
    pub fn services(&self) -> Vec<ServiceRecord> {
        lock(&self.inner.services).by_id.values().cloned().collect()
    }

    /// Reconciles every service with the job table (the scheduler's loop, before a cycle;
    /// never two at once).
    pub(crate) fn reconcile_services(&self) {
        let services = self.services();
        if services.is_empty() {
            return;
        }
        let mut live = self.live_replicas();
        for service in services {
            let replicas = live.remove(&service.id).unwrap_or_default();
            if service.stopped && replicas.is_empty() {
                continue;
            }
            self.reconcile_service(service, replicas);
        }
    }

    /// The live replicas of every service: (job, running), oldest first, by service id.
    fn live_replicas(&self) -> BTreeMap<u64, Vec<(u64, bool)>> {
        let owners: BTreeMap<u64, String> = lock(&self.inner.services)
            .by_id
            .values()
            .map(|s| (s.id, s.template.user.clone()))
            .collect();
        let st = lock(&self.inner.state);
        let mut live: BTreeMap<u64, Vec<(u64, bool)>> = BTreeMap::new();
        for job in st.jobs.active() {
            let Some(id) = job
                .spec
                .labels
                .get(SERVICE_LABEL)
                .and_then(|v| v.parse::<u64>().ok())
            else {
                continue;
            };
            let running = match job.state {
                JobState::Pending => false,
                JobState::Running => true,
                _ => continue,
            };
            if owners.get(&id) == Some(&job.spec.user) {
                live.entry(id).or_default().push((job.id, running));
            }
        }
        for jobs in live.values_mut() {
            jobs.sort_unstable();
        }
        live
    }

    /// Submits the replicas `service` lacks, or cancels those it has too many of (the
    /// newest, pending ones first).
    fn reconcile_service(&self, mut service: ServiceRecord, replicas: Vec<(u64, bool)>) {
        let before = service.clone();
        let wanted = if service.stopped { 0 } else { service.replicas } as usize;
        let mut count = replicas.len();
        while count < wanted {
            match self.submit_replica(&service) {
                Ok(_) => {
                    service.made += 1;
                    service.last_error = None;
                    count += 1;
                }
                Err(e) => {
                    service.last_error = Some(e.to_string());
                    break;
                }
            }
        }
        if count > wanted {
            let mut extra = replicas;
            extra.sort_by_key(|(job, running)| (*running, std::cmp::Reverse(*job)));
            for (job, _) in extra.into_iter().take(count - wanted) {
                if let Err(e) = self.cancel(job) {
                    tracing::warn!(service = service.id, job, "cannot stop a replica: {e}");
                }
            }
        }
        if service == before {
            return;
        }
        let mut sets = lock(&self.inner.services);
        if let Some(kept) = sets.by_id.get_mut(&service.id) {
            // A scale, stop or endpoint port that came meanwhile is kept.
            kept.made = service.made;
            kept.last_error = service.last_error;
            if let Err(e) = self.inner.store.put_service(kept) {
                tracing::error!(service = kept.id, "cannot write the service: {e}");
            }
        }
    }

    /// Submits one more replica of `service`; its job id.
    fn submit_replica(&self, service: &ServiceRecord) -> Result<u64, SubmitError> {
        let mut spec = service.template.clone();
        spec.name = format!("{}-r{}", service.name, service.made + 1);
        let submitter = if service.privileged {
            Submitter::Privileged
        } else {
            Submitter::User
        };
        self.submit(spec, submitter).map(|s| s.job.id)
    }

    /// Where service `id`'s endpoint may send requests: each running replica that passed
    /// its last health check (or has none), at its node's address (127.0.0.1 on the
    /// controller's own node) and port, by job.
    pub fn service_backends(&self, id: u64) -> Vec<(u64, std::net::SocketAddr)> {
        let jobs = self.live_replicas().remove(&id).unwrap_or_default();
        let ready: Vec<(u64, String, u16)> = {
            let st = lock(&self.inner.state);
            jobs.iter()
                .filter(|(_, running)| *running)
                .filter_map(|(job, _)| st.jobs.get(*job))
                .filter(|j| {
                    j.health.as_ref().is_none_or(|h| {
                        matches!(h.state, HealthState::Healthy | HealthState::Unchecked)
                    }) && j.stopping.is_none()
                })
                .filter_map(|j| Some((j.id, j.tasks.first()?.node.clone(), j.service_port?)))
                .collect()
        };
        let members = lock(&self.inner.members);
        ready
            .into_iter()
            .filter_map(|(job, node, port)| {
                let ip = match members.by_name(&node) {
                    Some((_, m)) if m.agent().is_some() => m.addr.parse().ok()?,
                    _ => std::net::IpAddr::from([127, 0, 0, 1]),
                };
                Some((job, std::net::SocketAddr::new(ip, port)))
            })
            .collect()
    }

    /// Records the port service `id`'s endpoint listens on.
    pub fn set_endpoint_port(&self, id: u64, port: u16) {
        let mut sets = lock(&self.inner.services);
        if let Some(service) = sets.by_id.get_mut(&id)
            && service.endpoint_port != Some(port)
        {
            service.endpoint_port = Some(port);
            if let Err(e) = self.inner.store.put_service(service) {
                tracing::error!(service = id, "cannot write the service: {e}");
            }
        }
    }

    /// `service` with the state of each live replica (`GET /v1/services/{id}`).
    pub fn service_view(&self, service: ServiceRecord) -> ServiceView {
        let jobs = self.live_replicas().remove(&service.id).unwrap_or_default();
        let st = lock(&self.inner.state);
        let replica_jobs = jobs
            .iter()
            .filter_map(|(id, _)| st.jobs.get(*id))
            .map(|j| ReplicaView {
                job: j.id,
                state: j.state.as_str().to_string(),
                node: j.tasks.first().map(|t| t.node.clone()),
                port: j.service_port,
                health: j.health.as_ref().map(|h| h.state),
                restarts: j.restarts,
                reason: (j.state == JobState::Pending)
                    .then(|| j.reason.as_ref().map(|r| r.message.clone()))
                    .flatten(),
            })
            .collect();
        ServiceView {
            service,
            replica_jobs,
        }
    }

    fn event_service(&self, id: u64, message: String) {
        tracing::info!(service = id, "{message}");
        if let Err(e) = self.inner.store.event(
            now_ms(),
            None,
            "service",
            format!("service {id}: {message}"),
        ) {
            tracing::error!(service = id, "cannot write event: {e}");
        }
    }
}
