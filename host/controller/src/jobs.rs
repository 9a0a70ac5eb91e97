//! Job operations behind the API: submit (validate, "could it ever fit", submit-time
//! admission, durable write), cancel, list, get, logs (the node view is in `node_view.rs`).
//!
//! Owns: the rules of these operations. Does not own HTTP status codes (`api`).

use super::job_edit;
use super::job_table::{JobPage, JobQuery};
use super::transition::Transition;
use super::transition::host_reason;
use super::{Scheduler, lock, now_ms};
use gantry_api::model::{ArrayMember, FieldError, JobRecord, JobSpec, JobState, StopCause};
use gantry_api::views::Submitted;
use gantry_contract::ReasonCode;
use gantry_store::StoreError;
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a submission was refused.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// A field is invalid.
    #[error("{}: {}", .0.field, .0.message)]
    Field(FieldError),
    /// The caller may not ask for this (a user's tier above its queue's limit).
    #[error("{}: {}", .0.field, .0.message)]
    Forbidden(FieldError),
    /// The submission, with its array expanded, is over `limits.max_submission_bytes`.
    #[error("{}: {}", .0.field, .0.message)]
    TooLarge(FieldError),
    /// The user has too many pending jobs (`limits.max_pending_per_user`).
    #[error("{}: {}", .0.field, .0.message)]
    TooMany(FieldError),
    /// No node could ever hold the job.
    #[error("no node could ever hold this job: {0}")]
    Unsatisfiable(String),
    /// An admission plugin rejected it.
    #[error("rejected by policy {plugin}: {message}")]
    Rejected {
        /// Plugin.
        plugin: String,
        /// Its message.
        message: String,
    },
    /// The store failed; the job was not accepted.
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// Where a task's log is read from.
#[derive(Debug, Clone)]
pub enum TaskLog {
    /// A file on the controller's node.
    Here(std::path::PathBuf),
    /// The run on an agent's node (read through `AgentClient::log`).
    Agent(
        gantry_api::agent_client::AgentClient,
        gantry_api::cluster::TaskKey,
    ),
}

impl Scheduler {
    /// Refuses, naming `user`, a job whose user cannot run here (root without
    /// `execution.allow_root`, no account and no `execution.user_map` entry), and, naming
    /// `workdir`, one whose working directory that user cannot enter, when this node is the
    /// cluster's only one; it would be accepted and then fail at every launch. With agents,
    /// accounts and directories may differ per node and the launch decides.
    pub(super) fn check_runnable_user(&self, spec: &JobSpec) -> Result<(), SubmitError> {
        if !self.only_local_node() {
            return Ok(());
        }
        let identity = self
            .inner
            .executor
            .identity(&spec.user, spec.anonymous)
            .map_err(|e| SubmitError::Field(field_error("user", e.to_string())))?;
        if let (Some(who), Some(dir)) = (&identity, &spec.workdir) {
            gantry_node::executor::task_files::check_enterable(std::path::Path::new(dir), who)
                .map_err(|why| SubmitError::Field(field_error("workdir", why)))?;
        }
        Ok(())
    }
}

impl Scheduler {
    /// Whether this node is the cluster's only one (no agent): then what cannot run here
    /// cannot run anywhere, and a submit may refuse it.
    pub(super) fn only_local_node(&self) -> bool {
        let members = lock(&self.inner.members);
        let mut all = members.all();
        matches!((all.next(), all.next()), (Some((_, m)), None) if m.agent().is_none())
    }
}

pub(super) fn field_error(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Why a cancel was refused.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    /// No such job.
    #[error("job {0} does not exist")]
    NotFound(u64),
    /// It already ended.
    #[error("job {0} already ended ({1})")]
    Ended(u64, &'static str),
    /// History could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Scheduler {
    /// Validates, checks and durably stores a new job (or every member of an array); returns
    /// it (the first member) once acknowledged, with the ids of all members of an array.
    /// `submitter` says whether the caller may set any tier (`submit_limits`).
    pub(crate) fn submit(
        &self,
        mut spec: JobSpec,
        submitter: crate::submitter::Submitter,
    ) -> Result<Submitted, SubmitError> {
        spec.validate().map_err(SubmitError::Field)?;
        if spec.service.as_ref().is_some_and(|s| s.replicas > 0) {
            return Err(SubmitError::Field(field_error(
                "service.replicas",
                "a service with replicas is created with POST /v1/services (gantry service create)",
            )));
        }
        self.check_image(&spec)?;
        self.check_runnable_user(&spec)?;
        // Held to the end: the new jobs count as pending for their user until they are in
        // the job table.
        let _reserved = self.check_submit_limits(&spec, submitter)?;
        self.check_dependencies(&spec)?;
        self.admit_at_submit(&mut spec, submitter, None)?;
        // After admission, so a policy's own time rules are the ones users see first.
        self.limit_interactive(&mut spec)?;
        let mut records = self.new_records(spec)?;
        // A hold asked at submit is the submitter's: an operator's is lifted only by one.
        let role = match submitter {
            crate::submitter::Submitter::Privileged => gantry_api::model::HoldRole::Operator,
            crate::submitter::Submitter::User => gantry_api::model::HoldRole::User,
        };
        for record in records.iter_mut().filter(|r| r.spec.hold) {
            let by = record.spec.user.clone();
            job_edit::apply_to_new(record, Transition::Held { by, role });
        }
        for record in &records {
            job_edit::write_new(&self.inner.store, record)?;
            // The job is the acknowledgement; its event is history, which may be on a
            // server that is away (the record stands either way).
            if let Err(e) = self.inner.store.event(
                record.submit_ms,
                Some(record.id),
                "submitted",
                format!("by {}", record.spec.user),
            ) {
                tracing::error!(job = record.id, "cannot write the submitted event: {e}");
            }
        }
        self.inner.store.flush()?;
        {
            lock(&self.inner.state).jobs.insert_stored(&records);
        }
        for record in &records {
            self.inner.metrics.submits.inc();
            let by = format!("by {}", record.spec.user);
            super::job_trace::job_event(record.id, "submitted", 0, &by);
        }
        self.wake();
        let array_job_ids = if records.len() > 1 || records.iter().any(|r| r.array.is_some()) {
            records.iter().map(|r| r.id).collect()
        } else {
            Vec::new()
        };
        let job = records
            .into_iter()
            .next()
            .ok_or_else(|| SubmitError::Field(field_error("array", "no members")))?;
        Ok(Submitted { job, array_job_ids })
    }

    /// The records of a submission: one job, or one per array index with consecutive ids
    /// (the first member's id is the array's), stamped with a submit time that never goes
    /// below an earlier id's.
    fn new_records(&self, spec: JobSpec) -> Result<Vec<JobRecord>, SubmitError> {
        let mut clock = lock(&self.inner.submit_clock);
        let submit_ms = now_ms().max(*clock);
        *clock = submit_ms;
        let Some(array) = spec.array.clone() else {
            let id = self.inner.store.next_id("job")?;
            return Ok(vec![JobRecord::new(id, spec, submit_ms)]);
        };
        let mut records = Vec::with_capacity(array.indices.len());
        let mut array_id = None;
        // The array's first member keeps the index list; every other carries only its own
        // index (`record.array`), so an array costs about what as many single jobs cost.
        let mut member_spec = spec.clone();
        member_spec.array = None;
        let count = u32::try_from(array.indices.len()).unwrap_or(u32::MAX);
        let min = array.indices.iter().copied().min().unwrap_or(0);
        let max = array.indices.iter().copied().max().unwrap_or(0);
        for index in array.indices {
            let id = self.inner.store.next_id("job")?;
            let first = array_id.is_none();
            let array_id = *array_id.get_or_insert(id);
            let member = if first { &spec } else { &member_spec };
            let mut record = JobRecord::new(id, member.clone(), submit_ms);
            record.array = Some(ArrayMember {
                array_id,
                index,
                max_running: array.max_running,
                count,
                min,
                max,
            });
            records.push(record);
        }
        Ok(records)
    }

    /// Every dependency must name a job (or array) that exists.
    pub(super) fn check_dependencies(&self, spec: &JobSpec) -> Result<(), SubmitError> {
        let st = lock(&self.inner.state);
        for (i, d) in spec.dependencies.iter().enumerate() {
            if !st.jobs.names_job_or_array(d.job)? {
                return Err(SubmitError::Field(field_error(
                    format!("dependencies[{i}].job"),
                    format!("job {} does not exist", d.job),
                )));
            }
        }
        Ok(())
    }

    /// An interactive job may run at most its queue's interactive time limit, and gets that
    /// limit when it asks for none: an unlimited notebook is a GPU lost to the cluster.
    pub(super) fn limit_interactive(&self, spec: &mut JobSpec) -> Result<(), SubmitError> {
        if spec.kind != gantry_contract::JobKind::Interactive {
            return Ok(());
        }
        let Some(max) = self.inner.config.execution.interactive_limit_s(&spec.queue) else {
            return Ok(());
        };
        if spec.time_limit_s > max {
            return Err(SubmitError::Field(field_error(
                "time_limit_s",
                format!(
                    "interactive jobs in queue {} may run at most {max} s \
                     (execution.interactive_max_time_s); asked {} s",
                    spec.queue, spec.time_limit_s
                ),
            )));
        }
        if spec.time_limit_s == 0 {
            spec.time_limit_s = max;
        }
        Ok(())
    }

    /// Cancels a pending job at once, or stops a running one (SIGTERM, grace, SIGKILL).
    pub fn cancel(&self, id: u64) -> Result<JobRecord, CancelError> {
        self.cancel_by(id, None)
    }

    /// [`Self::cancel`], recording who asked (`sacct`'s `CANCELLED by UID`).
    pub(crate) fn cancel_by(&self, id: u64, by: Option<&str>) -> Result<JobRecord, CancelError> {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(id) else {
            // Only jobs that ended long enough ago are out of memory.
            return Err(match st.jobs.find(id) {
                Ok(Some(j)) => CancelError::Ended(id, j.state.as_str()),
                Ok(None) => CancelError::NotFound(id),
                Err(e) => CancelError::Store(e),
            });
        };
        if let Some(by) = by.filter(|_| !job.state.is_terminal()) {
            job.annotate(super::job_edit::Annotation::CancelledBy(by.to_string()));
        }
        match job.state {
            JobState::Pending => {
                let cancelled = Transition::CancelledPending {
                    end_reason: "cancelled".into(),
                    reason: host_reason(ReasonCode::Other, "cancelled while pending".into()),
                    at_ms: now_ms(),
                };
                job.apply_or_log(cancelled);
                super::job_trace::job_event(
                    id,
                    "finished",
                    0,
                    "cancelled: cancelled while pending",
                );
            }
            JobState::Running => {
                job.apply_or_log(Transition::StopRequested(StopCause::Cancel));
                self.stop_tasks(&job, Duration::from_secs(self.inner.config.kill_grace_s));
            }
            s => return Err(CancelError::Ended(id, s.as_str())),
        }
        let snapshot = job.record().clone();
        // Written under the lock, as every change is (`job_edit.rs`); flushed after it.
        let written = job.write();
        drop(st);
        if let Err(e) = written.and_then(|()| self.inner.store.flush()) {
            tracing::error!(job = id, "cannot persist cancel: {e}");
        }
        let _ = self
            .inner
            .store
            .event(now_ms(), Some(id), "cancel", "requested".into());
        self.wake();
        Ok(snapshot)
    }

    /// One job, from memory or history (`None` also when history cannot be read, which
    /// is logged).
    pub(crate) fn job(&self, id: u64) -> Option<JobRecord> {
        let store = {
            let st = lock(&self.inner.state);
            if let Some(j) = st.jobs.get(id) {
                let job = j.clone();
                drop(st);
                return Some(self.with_pull_progress(job));
            }
            st.jobs.store().clone()
        };
        // Not in memory: from history, without the lock.
        store.job(id).unwrap_or_else(|e| {
            tracing::error!(job = id, "cannot read job history: {e}");
            None
        })
    }

    /// One page of at most `limit` jobs matching `q`, newest first, from memory and history.
    pub(crate) fn jobs(&self, q: &JobQuery, limit: usize) -> Result<JobPage, StoreError> {
        let snapshot = lock(&self.inner.state).jobs.list_snapshot(q, limit);
        snapshot.page(q, limit)
    }

    /// Task `task` of `job` when it runs (or ran) on an agent's node: that agent and the run,
    /// to read its log or run its service's check there (`None`: on the controller's node,
    /// whose log is [`Scheduler::task_log_path`]).
    pub(crate) fn remote_task(
        &self,
        job: &JobRecord,
        task: usize,
    ) -> Option<(
        gantry_api::agent_client::AgentClient,
        gantry_api::cluster::TaskKey,
    )> {
        let runner = self.runner_of(&job.tasks.get(task)?.node)?;
        let agent = runner.agent()?.clone();
        Some((agent, Self::task_key(job, task)))
    }

    /// Where task `task` of `job` writes (or wrote) its log: a file here, or its agent's run.
    pub(crate) fn task_log(&self, job: &JobRecord, task: usize) -> TaskLog {
        match self.remote_task(job, task) {
            Some((agent, key)) => TaskLog::Agent(agent, key),
            None => TaskLog::Here(self.task_log_path(job.id, task)),
        }
    }

    /// Recent decisions about a job, oldest first: from the log while the job is in
    /// memory, from the store once it has left.
    pub(crate) fn decisions(&self, id: u64) -> serde_json::Value {
        let logged = lock(&self.inner.decisions).of_job(id);
        if logged.is_empty()
            && let Ok(Some(kept)) = self.inner.store.job_decisions(id)
        {
            return kept;
        }
        serde_json::to_value(logged).unwrap_or_default()
    }

    /// `/metrics` in the OpenMetrics text format (`metrics::CONTENT_TYPE`).
    pub(crate) fn metrics_text(&self) -> String {
        let st = lock(&self.inner.state);
        let mut jobs: BTreeMap<(JobState, String), i64> = BTreeMap::new();
        self.inner.metrics.jobs_in_memory.set(st.jobs.len() as i64);
        for j in st.jobs.unfinished() {
            *jobs.entry((j.state, j.spec.queue.clone())).or_default() += 1;
        }
        let nodes: Vec<gantry_node::inventory::NodeInfo> = lock(&self.inner.members)
            .all()
            .map(|(_, m)| m.info.clone())
            .collect();
        let mut alloc: BTreeMap<(String, String), f64> = BTreeMap::new();
        let mut total: BTreeMap<(String, String), f64> = BTreeMap::new();
        for node in &nodes {
            for g in &node.gpus {
                let key = (node.name.clone(), g.model.clone());
                *total.entry(key.clone()).or_default() += 1.0;
                alloc.entry(key).or_default();
            }
        }
        for t in st.jobs.running().flat_map(|j| &j.tasks) {
            let Some(node) = nodes.iter().find(|n| n.name == t.node) else {
                continue;
            };
            for share in &t.gpus {
                if let Some(g) = node.gpus.iter().find(|g| g.index == share.index) {
                    *alloc
                        .entry((node.name.clone(), g.model.clone()))
                        .or_default() += f64::from(share.milli) / 1000.0;
                }
            }
        }
        drop(st);
        let m = &self.inner.metrics;
        m.jobs.clear();
        for ((state, queue), n) in jobs {
            let labels = crate::metrics::StateQueue {
                state: state.as_str().to_string(),
                queue,
            };
            m.jobs.get_or_create(&labels).set(n);
        }
        for (gauge, values) in [(&m.gpus_allocated, alloc), (&m.gpus, total)] {
            gauge.clear();
            for ((node, model), v) in values {
                let labels = crate::metrics::NodeModel { node, model };
                gauge.get_or_create(&labels).set(v);
            }
        }
        crate::metrics::Metrics::catch_up(
            &m.telemetry_dropped_spans,
            super::job_trace::dropped_spans(),
        );
        m.render()
    }

    /// Recent events of a job.
    pub(crate) fn events(&self, id: u64) -> Result<Vec<gantry_store::Event>, StoreError> {
        self.inner.store.events(Some(id), 200)
    }
}
