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
//! A replica to be stopped is drained first: the endpoint sends it no new request, and it
//! is cancelled once those in flight are answered (or after [`DRAIN_MAX_MS`]). Which
//! replicas to make or drain, rolling updates included, is `service_rollout.rs`.
//!
//! Owns: the records (in memory and in the store's `services` tree), the replicas' view of
//! the job table, draining and the endpoint's shared counters. Does not own submitting or
//! cancelling a job (`jobs.rs`) nor a replica's restarts and health (`service.rs`).

use super::jobs::SubmitError;
use super::{Scheduler, lock, now_ms};
use crate::submitter::Submitter;
use gantry_api::model::{
    JobSpec, JobState, ReplicaView, Revision, ScaleSample, ServiceRecord, ServiceView,
};
use gantry_contract::JobKind;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The label that names a replica's service.
pub const SERVICE_LABEL: &str = "gantry.service";
/// The label that names the revision a replica was made from (set by the owner only).
pub const REVISION_LABEL: &str = "gantry.revision";
/// A draining replica is cancelled no sooner than this after it was taken out of the
/// endpoint (longer than the endpoint keeps its list of replicas).
const DRAIN_MIN_MS: u64 = 500;
/// ... and no later than this, requests in flight or not.
pub const DRAIN_MAX_MS: u64 = 30_000;
/// Autoscaler readings kept per service.
const SAMPLES_KEPT: usize = 240;

/// The services, by id, with what the endpoint and the autoscaler share with the owner.
#[derive(Debug, Default)]
pub(crate) struct ServiceSets {
    pub(super) by_id: BTreeMap<u64, ServiceRecord>,
    /// Replicas being drained: job → since when (ms), and whether cancelled already.
    draining: BTreeMap<u64, (u64, bool)>,
    /// Requests in flight through the endpoint, per replica job.
    in_flight: HashMap<u64, Arc<AtomicUsize>>,
    /// When the endpoint last received a request, per service (ms).
    activity: HashMap<u64, Arc<AtomicU64>>,
    /// The autoscaler's recent readings, per service.
    samples: HashMap<u64, VecDeque<ScaleSample>>,
    /// Why a service's endpoint does not listen on its kept port now (issue 43, finding 9).
    endpoint_problems: HashMap<u64, String>,
}

impl ServiceSets {
    /// The services kept in `store` (a record from before revisions gets its first one).
    pub(crate) fn load(store: &gantry_store::Store) -> Result<Self, gantry_store::StoreError> {
        let mut by_id: BTreeMap<u64, ServiceRecord> =
            store.services()?.into_iter().map(|s| (s.id, s)).collect();
        for s in by_id.values_mut().filter(|s| s.history.is_empty()) {
            s.last_revision = s.last_revision.max(s.revision);
            s.history.push(Revision {
                revision: s.revision,
                template: s.template.clone(),
                created_ms: s.created_ms,
                change: "created".into(),
                rolled_back: None,
            });
        }
        Ok(Self {
            by_id,
            ..Self::default()
        })
    }
}

/// A live replica of a service, as the job table has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replica {
    pub job: u64,
    pub running: bool,
    /// The revision it was made from (1 for a replica from before revisions).
    pub revision: u32,
    /// Running, healthy (or without a check) and not being stopped.
    pub ready: bool,
    /// Cancelled already: its tasks are being stopped.
    pub stopping: bool,
    /// GPUs in use on its node, all jobs counted (0 while pending).
    pub node_gpus_in_use: usize,
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
    /// Its replicas are set by its autoscaler.
    #[error("service {0} is autoscaled: change its bounds with an update")]
    Autoscaled(u64),
    /// No such revision in its history, or none to roll back to.
    #[error("{0}")]
    NoRevision(String),
    /// The store could not write it.
    #[error(transparent)]
    Store(#[from] gantry_store::StoreError),
}

impl Scheduler {
    /// Creates a service from `spec` (kind `service`, `service.replicas` wanted, 1 when 0)
    /// as `submitter`; its first replicas are submitted at once, each checked as any job.
    pub(crate) fn create_service(
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
        let strategy = service.rollout.take().unwrap_or_default();
        let autoscale = service.autoscale.take();
        let replicas = match &autoscale {
            Some(a) => replicas.clamp(a.min_replicas.max(1), a.max_replicas),
            None => replicas,
        };
        let id = self.inner.store.next_id("service")?;
        spec.labels.insert(SERVICE_LABEL.into(), id.to_string());
        let record = ServiceRecord {
            id,
            name: spec.name.clone(),
            template: spec.clone(),
            replicas,
            revision: 1,
            made: 0,
            created_ms: now_ms(),
            stopped: false,
            privileged: matches!(submitter, Submitter::Privileged),
            endpoint_port: None,
            last_error: None,
            strategy,
            autoscale,
            history: vec![Revision {
                revision: 1,
                template: spec,
                created_ms: now_ms(),
                change: "created".into(),
                rolled_back: None,
            }],
            rollout: None,
            last_revision: 1,
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
    pub(crate) fn scale_service(
        &self,
        id: u64,
        replicas: u32,
    ) -> Result<ServiceRecord, ServiceError> {
        {
            let mut sets = lock(&self.inner.services);
            let service = sets.by_id.get_mut(&id).ok_or(ServiceError::NotFound(id))?;
            if service.stopped {
                return Err(ServiceError::Stopped(id));
            }
            if service.autoscale.is_some() {
                return Err(ServiceError::Autoscaled(id));
            }
            service.replicas = replicas;
            self.inner.store.put_service(service)?;
        }
        self.event_service(id, format!("scaled to {replicas} replica(s)"));
        self.wake();
        self.service(id).ok_or(ServiceError::NotFound(id))
    }

    /// Stops service `id`: its replicas are cancelled and none is made again.
    pub(crate) fn stop_service(&self, id: u64) -> Result<ServiceRecord, ServiceError> {
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
    pub(crate) fn service(&self, id: u64) -> Option<ServiceRecord> {
        lock(&self.inner.services).by_id.get(&id).cloned()
    }

    /// Every service, by id.
    pub(crate) fn services(&self) -> Vec<ServiceRecord> {
        lock(&self.inner.services).by_id.values().cloned().collect()
    }

    /// Reconciles every service with the job table (the scheduler's loop, before a cycle;
    /// never two at once): drains that are done are cancelled, then each service gets the
    /// replicas it lacks and drains those it has too many of (`service_rollout.rs`).
    pub(crate) fn reconcile_services(&self) {
        let services = self.services();
        if services.is_empty() {
            return;
        }
        let mut live = self.live_replicas();
        self.finish_drains(&live);
        for service in services {
            let replicas = live.remove(&service.id).unwrap_or_default();
            if service.stopped && replicas.is_empty() {
                continue;
            }
            self.reconcile_service(service, replicas);
        }
    }

    /// The live replicas of every service, oldest first, by service id.
    pub(super) fn live_replicas(&self) -> BTreeMap<u64, Vec<Replica>> {
        let owners: BTreeMap<u64, String> = lock(&self.inner.services)
            .by_id
            .values()
            .map(|s| (s.id, s.template.user.clone()))
            .collect();
        let st = lock(&self.inner.state);
        let mut gpus_in_use: HashMap<&str, usize> = HashMap::new();
        for job in st.jobs.running() {
            for task in &job.tasks {
                *gpus_in_use.entry(task.node.as_str()).or_default() += task.gpus.len();
            }
        }
        let mut live: BTreeMap<u64, Vec<Replica>> = BTreeMap::new();
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
            if owners.get(&id) != Some(&job.spec.user) {
                continue;
            }
            let healthy = super::service::may_serve(job);
            let node = job.tasks.first().map(|t| t.node.as_str());
            live.entry(id).or_default().push(Replica {
                job: job.id,
                running,
                revision: job
                    .spec
                    .labels
                    .get(REVISION_LABEL)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1),
                ready: running && healthy && job.stopping.is_none(),
                stopping: job.stopping.is_some(),
                node_gpus_in_use: node.and_then(|n| gpus_in_use.get(n).copied()).unwrap_or(0),
            });
        }
        for jobs in live.values_mut() {
            jobs.sort_unstable_by_key(|r| r.job);
        }
        live
    }

    /// Takes replica `job` of a service out of its endpoint, to be cancelled once the
    /// requests in flight to it are answered; a pending one is cancelled at once.
    pub(super) fn drain_replica(&self, service: u64, job: u64, running: bool) {
        if !running {
            if let Err(e) = self.cancel(job) {
                tracing::warn!(service, job, "cannot stop a replica: {e}");
            }
            return;
        }
        lock(&self.inner.services)
            .draining
            .entry(job)
            .or_insert((now_ms(), false));
    }

    /// The jobs being drained.
    pub(super) fn draining_jobs(&self) -> std::collections::BTreeSet<u64> {
        lock(&self.inner.services)
            .draining
            .keys()
            .copied()
            .collect()
    }

    /// Cancels each draining replica with no request in flight (or drained too long), and
    /// forgets those that ended.
    fn finish_drains(&self, live: &BTreeMap<u64, Vec<Replica>>) {
        let now = now_ms();
        let due: Vec<u64> = {
            let mut sets = lock(&self.inner.services);
            let sets = &mut *sets;
            let live_jobs: std::collections::BTreeSet<u64> =
                live.values().flatten().map(|r| r.job).collect();
            sets.draining.retain(|job, _| live_jobs.contains(job));
            sets.in_flight
                .retain(|job, n| live_jobs.contains(job) || n.load(Ordering::Relaxed) > 0);
            let mut due = Vec::new();
            for (job, (since, cancelled)) in sets.draining.iter_mut() {
                let idle = sets
                    .in_flight
                    .get(job)
                    .is_none_or(|n| n.load(Ordering::Relaxed) == 0);
                let waited = now.saturating_sub(*since);
                if !*cancelled && ((idle && waited >= DRAIN_MIN_MS) || waited >= DRAIN_MAX_MS) {
                    *cancelled = true;
                    due.push(*job);
                }
            }
            due
        };
        for job in due {
            if let Err(e) = self.cancel(job) {
                tracing::warn!(job, "cannot stop a drained replica: {e}");
            }
        }
    }

    /// Submits one more replica of `service` (of its current revision); its job id.
    pub(super) fn submit_replica(&self, service: &ServiceRecord) -> Result<u64, SubmitError> {
        let mut spec = service.template.clone();
        spec.name = format!("{}-r{}", service.name, service.made + 1);
        spec.labels
            .insert(REVISION_LABEL.into(), service.revision.to_string());
        self.submit(spec, Self::replica_submitter(service))
            .map(|s| s.job.id)
    }

    /// Where service `id`'s endpoint may send requests: each ready replica not being
    /// drained, at its node's address (127.0.0.1 on the controller's own node) and port,
    /// with its counter of requests in flight.
    pub(crate) fn service_backends(
        &self,
        id: u64,
    ) -> Vec<(u64, std::net::SocketAddr, Arc<AtomicUsize>)> {
        let jobs = self.live_replicas().remove(&id).unwrap_or_default();
        let draining = self.draining_jobs();
        let ready: Vec<_> = {
            let st = lock(&self.inner.state);
            jobs.iter()
                .filter(|r| r.ready && !draining.contains(&r.job))
                .filter_map(|r| st.jobs.get(r.job))
                .filter_map(|j| {
                    let node = j.tasks.first()?.node.clone();
                    let user = (j.spec.user.clone(), j.spec.anonymous);
                    Some((j.id, node, j.service_port?, self.task_uid(j), user))
                })
                .collect()
        };
        let candidates: Vec<super::service::port_guard::Candidate> = {
            let members = lock(&self.inner.members);
            ready
                .into_iter()
                .filter_map(|(job, node, port, uid, (user, anonymous))| {
                    let (ip, remote) = match members.by_name(&node) {
                        Some((_, m)) if m.agent().is_some() => {
                            let ask = gantry_api::cluster::PortOwnerRequest {
                                port,
                                user,
                                anonymous,
                            };
                            (m.addr.parse().ok()?, m.agent().cloned().map(|a| (a, ask)))
                        }
                        _ => (std::net::IpAddr::from([127, 0, 0, 1]), None),
                    };
                    let addr = std::net::SocketAddr::new(ip, port);
                    Some(super::service::port_guard::Candidate {
                        job,
                        addr,
                        uid,
                        remote,
                    })
                })
                .collect()
        };
        // Only replicas whose port is their user's (issue 43, finding 8).
        let addrs = self.owned_backends(id, candidates);
        let mut sets = lock(&self.inner.services);
        addrs
            .into_iter()
            .map(|(job, addr)| (job, addr, sets.in_flight.entry(job).or_default().clone()))
            .collect()
    }

    /// The clock of service `id`'s last request through its endpoint (ms; 0: none yet).
    pub(crate) fn service_activity(&self, id: u64) -> Arc<AtomicU64> {
        lock(&self.inner.services)
            .activity
            .entry(id)
            .or_default()
            .clone()
    }

    /// Records why service `id`'s endpoint does not listen on its port now (`None`: it does).
    pub(crate) fn set_endpoint_problem(&self, id: u64, problem: Option<String>) {
        let mut sets = lock(&self.inner.services);
        match problem {
            Some(p) => sets.endpoint_problems.insert(id, p),
            None => sets.endpoint_problems.remove(&id),
        };
    }

    /// Records the port service `id`'s endpoint listens on.
    pub(crate) fn set_endpoint_port(&self, id: u64, port: u16) {
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
    pub(crate) fn service_view(&self, service: ServiceRecord) -> ServiceView {
        let jobs = self.live_replicas().remove(&service.id).unwrap_or_default();
        let (draining, scale_samples, endpoint_problem) = {
            let sets = lock(&self.inner.services);
            let samples = sets
                .samples
                .get(&service.id)
                .map(|q| q.iter().copied().collect())
                .unwrap_or_default();
            let problem = sets.endpoint_problems.get(&service.id).cloned();
            (sets.draining.clone(), samples, problem)
        };
        let sockets = gantry_node::port_owner::sockets();
        let st = lock(&self.inner.state);
        let replica_jobs = jobs
            .iter()
            .filter_map(|r| Some((r, st.jobs.get(r.job)?)))
            .map(|(r, j)| ReplicaView {
                job: j.id,
                state: j.state.as_str().to_string(),
                node: j.tasks.first().map(|t| t.node.clone()),
                port: j.service_port,
                health: j.health.as_ref().map(|h| h.state),
                restarts: j.restarts,
                reason: match j.state {
                    JobState::Pending => j.reason.as_ref().map(|r| r.message.clone()),
                    // Someone else's listener on its port (issue 43, finding 8).
                    JobState::Running => self.replica_port_problem(j, &sockets),
                    _ => None,
                },
                revision: r.revision,
                draining: draining.contains_key(&j.id),
            })
            .collect();
        ServiceView {
            service,
            replica_jobs,
            scale_samples,
            endpoint_problem,
        }
    }

    /// Keeps one reading of service `id`'s autoscaler (the last [`SAMPLES_KEPT`]).
    pub fn record_scale_sample(&self, id: u64, sample: ScaleSample) {
        let mut sets = lock(&self.inner.services);
        let q = sets.samples.entry(id).or_default();
        if q.len() == SAMPLES_KEPT {
            q.pop_front();
        }
        q.push_back(sample);
    }

    /// The last 200 events of service `id` (created, scaled, autoscaled with the values
    /// that caused it, updated, rolled out or back, stopped), oldest first.
    pub(crate) fn service_events(
        &self,
        id: u64,
    ) -> Result<Vec<gantry_store::Event>, gantry_store::StoreError> {
        self.inner
            .store
            .kind_events("service", &format!("service {id}: "), 200)
    }

    pub(crate) fn event_service(&self, id: u64, message: String) {
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
