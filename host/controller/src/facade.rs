//! The controller's face to the server: [`Controller`] and its five sub-handles, [`Jobs`],
//! [`Nodes`], [`Policy`], [`Services`] and [`Admin`], each a clone of the [`Scheduler`]
//! handle (an `Arc`) with one-line delegations to what the server may call. The server's
//! HTTP API, service endpoints, autoscaler and leadership (`host/server/src`) use only
//! these, and only its `serve.rs` names the [`Scheduler`]; a handler takes the narrowest
//! handle it needs (`State<Jobs>`, through axum's `FromRef` in the server's
//! `api/state.rs`, since this crate knows no axum).
//!
//! Owns: the public surface of the scheduler, and every `impl` of these six types (a guard
//! test, `facade_tests.rs`, fails if one stands elsewhere). Does not own any behaviour: each
//! method delegates to the scheduler's owner of it (`jobs.rs`, `nodes.rs`, `policy_ops.rs`,
//! `service_sets.rs`, `views.rs`, ...).

use super::enrolment::{JoinError, JoinStep, JoinTokenAction, JoinTokenAnswer};
use super::job_input::{InputRequest, InputSendError};
use super::jobs::TaskLog;
use super::jobs::{CancelError, SubmitError};
use super::nodes::NodeOpError;
use super::policy_error::PolicyOpError;
use super::policy_ops::SwapResult;
use super::service_sets::ServiceError;
use super::shadow::{ReplayReport, ShadowView};
use super::signal_ops::SignalError;
use super::submitter::Submitter;
use super::views::{About, AgentImages, ChangeFingerprint, UsageByName};
use super::{
    ControlError, FaultView, GcReport, HeartbeatError, JobPage, JobQuery, JobUpdate, PolicyView,
    Scheduler,
};
use gantry_api::cluster::{Heartbeat, HeartbeatReply, NodeImages};
use gantry_api::cluster_join::JoinRequest;
use gantry_api::model::{
    HoldRole, JobRecord, JobSpec, ScaleSample, ServiceRecord, ServiceView, UpdateRequest,
};
use gantry_api::views::{NodeView, PluginInfo, Submitted};
use gantry_config::Config;
use gantry_policy::{PipelineSpec, PipelineVersion};
use gantry_store::{AccountingFilter, AccountingRecord, Event, StoreError};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};

/// The controller as the server sees it: five areas, each a cheap handle.
#[derive(Clone, Debug)]
pub struct Controller(Scheduler);

/// Jobs: submit, control, read.
#[derive(Clone, Debug)]
pub struct Jobs(Scheduler);

/// Nodes: their views, drain and resume, and the agents' heartbeats.
#[derive(Clone, Debug)]
pub struct Nodes(Scheduler);

/// The scheduling policy: the pipeline, plugins, the shadow pipeline, replay, faults.
#[derive(Clone, Debug)]
pub struct Policy(Scheduler);

/// Replicated services and their endpoints.
#[derive(Clone, Debug)]
pub struct Services(Scheduler);

/// The daemon's own: settings, health, usage, accounting, metrics, garbage collection.
#[derive(Clone, Debug)]
pub struct Admin(Scheduler);

impl Controller {
    /// The facade of an open scheduler (`Scheduler::open_fenced`).
    pub fn new(scheduler: Scheduler) -> Self {
        Self(scheduler)
    }
    /// Jobs.
    pub fn jobs(&self) -> Jobs {
        Jobs(self.0.clone())
    }
    /// Nodes.
    pub fn nodes(&self) -> Nodes {
        Nodes(self.0.clone())
    }
    /// The policy.
    pub fn policy(&self) -> Policy {
        Policy(self.0.clone())
    }
    /// Services.
    pub fn services(&self) -> Services {
        Services(self.0.clone())
    }
    /// The daemon's own.
    pub fn admin(&self) -> Admin {
        Admin(self.0.clone())
    }
}

impl Jobs {
    /// Submits a job (`jobs.rs`).
    pub fn submit(&self, spec: JobSpec, by: Submitter) -> Result<Submitted, SubmitError> {
        self.0.submit(spec, by)
    }
    /// Cancels a job; `by` names who asked.
    pub fn cancel(&self, id: u64, by: &str) -> Result<JobRecord, CancelError> {
        self.0.cancel_by(id, Some(by))
    }
    /// Holds a pending job for `by` (`Some`), or releases a held one (`None`), as a caller
    /// of `role` (`job_control.rs`).
    pub fn hold(
        &self,
        id: u64,
        by: Option<&str>,
        role: HoldRole,
    ) -> Result<JobRecord, ControlError> {
        match by {
            Some(by) => self.0.hold(id, by, role),
            None => self.0.release(id, role),
        }
    }
    /// A receiver that changes whenever the scheduler is woken (a job submitted, ended,
    /// cancelled...): a follower waits on it instead of polling blindly.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.inner.changed.subscribe()
    }
    /// Stops a running job to run it again (`user_requeue.rs`).
    pub fn requeue(&self, id: u64) -> Result<JobRecord, ControlError> {
        self.0.requeue_running(id)
    }
    /// Changes a pending job.
    pub fn update(&self, id: u64, u: JobUpdate, by: Submitter) -> Result<JobRecord, ControlError> {
        self.0.update(id, u, by)
    }
    /// Signals a job's running tasks (`signal_ops.rs`).
    pub fn signal(&self, id: u64, signal: i32) -> Result<usize, SignalError> {
        self.0.signal_job(id, signal)
    }
    /// Sends input to an interactive job (`job_input.rs`).
    pub fn send_input(&self, id: u64, r: &InputRequest) -> Result<usize, InputSendError> {
        self.0.send_input(id, r)
    }
    /// When a job of `spec` would start, in place of pending job `replaces` if given; nothing
    /// is submitted (`what_if.rs`).
    pub fn what_if(
        &self,
        spec: JobSpec,
        replaces: Option<u64>,
    ) -> Result<gantry_api::model::StartForecast, SubmitError> {
        self.0.what_if(spec, replaces)
    }
    /// One job, from memory or history.
    pub fn get(&self, id: u64) -> Option<JobRecord> {
        self.0.job(id).map(|j| self.0.with_forecast(j))
    }
    /// A page of jobs, newest first (`job_table.rs`).
    pub fn list(&self, q: &JobQuery, limit: usize) -> Result<JobPage, StoreError> {
        let mut page = self.0.jobs(q, limit)?;
        self.0.add_forecasts(&mut page.jobs);
        Ok(page)
    }
    /// A job's events.
    pub fn events(&self, id: u64) -> Result<Vec<Event>, StoreError> {
        self.0.events(id)
    }
    /// Recent decisions about a job (`decisions.rs`).
    pub fn decisions(&self, id: u64) -> serde_json::Value {
        self.0.decisions(id)
    }
    /// Where a task writes its log: a file here or its agent's run (`jobs.rs`).
    pub fn task_log(&self, job: &JobRecord, task: usize) -> TaskLog {
        self.0.task_log(job, task)
    }
}

impl Nodes {
    /// Every node (`node_view.rs`).
    pub fn list(&self) -> Vec<NodeView> {
        self.0.nodes()
    }
    /// Drains a node (`nodes.rs`).
    pub fn drain(&self, name: &str, reason: &str, by: &str) -> Result<NodeView, NodeOpError> {
        self.0.drain(name, reason, by)
    }
    /// Resumes a drained node.
    pub fn resume(&self, name: &str, by: &str) -> Result<NodeView, NodeOpError> {
        self.0.resume(name, by)
    }
    /// Forgets a node that is down (`node_down.rs`).
    pub fn forget(&self, name: &str, by: &str) -> Result<(), NodeOpError> {
        self.0.forget_node(name, by)
    }
    /// An agent's heartbeat, sent with `credential` (checked) (`remote.rs`).
    pub fn heartbeat(
        &self,
        hb: Heartbeat,
        credential: String,
    ) -> Result<HeartbeatReply, HeartbeatError> {
        self.0.heartbeat(hb, credential)
    }
    /// The credential an agent must present: node `node`'s own, or for an agent of protocol
    /// 1 (no node named) the cluster token. Empty: no agent may join.
    pub fn agent_credential(&self, node: Option<&str>) -> String {
        self.0.agent_credential(node)
    }
    /// A node joins with a join token (`enrolment.rs`); `None`: the CA nodes check first
    /// (`request` is ignored), `Some`: the join.
    pub fn join(&self, request: Option<JoinRequest>) -> Result<JoinStep, JoinError> {
        match request {
            None => Ok(JoinStep::Ca(self.0.join_ca_pem())),
            Some(r) => self
                .0
                .join(r)
                .map(|reply| JoinStep::Joined(Box::new(reply))),
        }
    }
    /// The image caches of the controller's node and of each agent (`views.rs`).
    pub fn cached_images(&self) -> (std::io::Result<NodeImages>, Vec<AgentImages>) {
        self.0.cached_images()
    }
}

impl Policy {
    /// The active pipeline and what it was built from (`policy_ops.rs`).
    pub fn view(&self) -> PolicyView {
        self.0.policy()
    }
    /// Replaces the pipeline.
    pub fn set(&self, spec: PipelineSpec, by: &str) -> Result<SwapResult, PolicyOpError> {
        self.0.set_policy(spec, by)
    }
    /// Goes back to the previous pipeline.
    pub fn rollback(&self, by: &str) -> Result<SwapResult, PolicyOpError> {
        self.0.rollback_policy(by)
    }
    /// Stores an uploaded plugin.
    pub fn upload_plugin(&self, bytes: &[u8]) -> Result<PluginInfo, PolicyOpError> {
        self.0.upload_plugin(bytes)
    }
    /// The plugins known.
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.0.plugins()
    }
    /// The pipelines that were active, oldest first.
    pub fn history(&self) -> Vec<PipelineVersion> {
        self.0.policy_history()
    }
    /// Recent plugin faults.
    pub fn faults(&self) -> Vec<FaultView> {
        self.0.faults()
    }
    /// The shadow pipeline and how it differs (`shadow.rs`).
    pub fn shadow(&self) -> Option<ShadowView> {
        self.0.shadow()
    }
    /// Sets the shadow pipeline.
    pub fn set_shadow(&self, spec: PipelineSpec) -> Result<ShadowView, PolicyOpError> {
        self.0.set_shadow(spec)
    }
    /// Removes the shadow pipeline.
    pub fn clear_shadow(&self) -> Option<ShadowView> {
        self.0.clear_shadow()
    }
    /// Replays recorded cycles under another pipeline.
    pub fn replay(&self, spec: &PipelineSpec, since_s: u64) -> Result<ReplayReport, PolicyOpError> {
        self.0.replay(spec, since_s)
    }
}

impl Services {
    /// Checks a new connection to a replica of `service` on this node: the socket that
    /// accepted it must be the replica's user's (`service/port_guard.rs`; process-wide, so it
    /// needs no handle: the endpoint's connector calls it).
    pub async fn verify_accepted(
        service: u64,
        server: SocketAddr,
        client: SocketAddr,
    ) -> Result<(), String> {
        crate::service::port_guard::verify_accepted(service, server, client).await
    }
    /// Creates a service and submits its replicas (`service_sets.rs`).
    pub fn create(&self, spec: JobSpec, by: Submitter) -> Result<ServiceRecord, ServiceError> {
        self.0.create_service(spec, by)
    }
    /// Rolls out a new revision (`service_rollout.rs`).
    pub fn update(&self, id: u64, r: UpdateRequest) -> Result<ServiceRecord, ServiceError> {
        self.0.update_service(id, r)
    }
    /// Rolls back to an earlier revision.
    pub fn rollback(&self, id: u64, to: Option<u32>) -> Result<ServiceRecord, ServiceError> {
        self.0.rollback_service(id, to)
    }
    /// Sets the replica count.
    pub fn scale(&self, id: u64, replicas: u32) -> Result<ServiceRecord, ServiceError> {
        self.0.scale_service(id, replicas)
    }
    /// The autoscaler's new replica count, with why and the sample it came from.
    pub fn autoscale(&self, id: u64, replicas: u32, why: &str, sample: ScaleSample) {
        self.0.autoscale_service(id, replicas, why, sample)
    }
    /// Stops a service and its replicas.
    pub fn stop(&self, id: u64) -> Result<ServiceRecord, ServiceError> {
        self.0.stop_service(id)
    }
    /// One service.
    pub fn get(&self, id: u64) -> Option<ServiceRecord> {
        self.0.service(id)
    }
    /// Every service.
    pub fn list(&self) -> Vec<ServiceRecord> {
        self.0.services()
    }
    /// A service with its replicas.
    pub fn view(&self, service: ServiceRecord) -> ServiceView {
        self.0.service_view(service)
    }
    /// A service's events.
    pub fn events(&self, id: u64) -> Result<Vec<Event>, StoreError> {
        self.0.service_events(id)
    }
    /// Records an event of a service.
    pub fn event(&self, id: u64, message: String) {
        self.0.event_service(id, message)
    }
    /// The replicas an endpoint may forward to: job, address, open connections.
    pub fn backends(&self, id: u64) -> Vec<(u64, std::net::SocketAddr, Arc<AtomicUsize>)> {
        self.0.service_backends(id)
    }
    /// When the endpoint last forwarded a request (ms since the epoch).
    pub fn activity(&self, id: u64) -> Arc<AtomicU64> {
        self.0.service_activity(id)
    }
    /// Wakes a service scaled to zero; whether a replica may come.
    pub fn activate(&self, id: u64) -> bool {
        self.0.activate_service(id)
    }
    /// The port its endpoint listens on.
    pub fn set_endpoint_port(&self, id: u64, port: u16) {
        self.0.set_endpoint_port(id, port)
    }
    /// Why its endpoint is closed (`None`: it is open).
    pub fn set_endpoint_problem(&self, id: u64, problem: Option<String>) {
        self.0.set_endpoint_problem(id, problem)
    }
    /// The daemon's settings (listen address, `[services]`, `[http]`).
    pub fn config(&self) -> &Config {
        self.0.config()
    }
}

impl Admin {
    /// Makes, lists or revokes join tokens (`enrolment.rs`).
    pub fn join_tokens(&self, action: JoinTokenAction) -> Result<JoinTokenAnswer, JoinError> {
        self.0.join_tokens(action)
    }
    /// The daemon's settings.
    pub fn config(&self) -> &Config {
        self.0.config()
    }
    /// The node's task isolation, and where state and history live (`views.rs`).
    pub fn about(&self) -> About {
        self.0.about()
    }
    /// Fingerprints of what the live stream watches.
    pub fn change_fingerprint(&self) -> ChangeFingerprint {
        self.0.change_fingerprint()
    }
    /// Decayed GPU usage by user and by account at `now_ms`.
    pub fn usage_at(&self, now_ms: u64) -> (UsageByName, UsageByName) {
        self.0.usage_at(now_ms)
    }
    /// Accounting records (`accounting.rs`).
    pub fn accounting(&self, f: &AccountingFilter) -> Result<Vec<AccountingRecord>, StoreError> {
        self.0.accounting(f)
    }
    /// The Prometheus text of `/metrics`.
    pub fn metrics_text(&self) -> String {
        self.0.metrics_text()
    }
    /// Deletes old history, at most `max_batches` batches (`retention.rs`).
    pub fn collect_garbage(&self, max_batches: u64) -> Result<GcReport, StoreError> {
        self.0.collect_garbage(max_batches)
    }
}

#[cfg(test)]
#[path = "facade_tests.rs"]
mod tests;
