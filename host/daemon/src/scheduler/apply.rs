//! Applying decisions and reacting to processes: starting the tasks of a started job
//! (environment, logs, launch), evicting, recording pending reasons and faults,
//! finishing a job when its tasks end, time limits, and re-attaching after a restart.
//!
//! Owns: job state transitions. Does not own the decisions (the engine).

use super::{Scheduler, lock, now_ms};
use crate::executor::{TaskEvent, TaskExit, TaskLaunch};
use crate::model::{GpuShareView, JobRecord, JobState, ReasonView, StopCause, TaskRecord};
use gantry_contract::ReasonCode;
use gantry_engine::{CycleOutcome, StartDecision};
use std::path::PathBuf;
use std::time::Duration;

/// Base of the rendezvous port given to gangs (`MASTER_PORT`).
const MASTER_PORT_BASE: u64 = 29_500;

impl Scheduler {
    pub(crate) fn job_dir(&self, id: u64) -> PathBuf {
        self.inner.config.data_dir.join("jobs").join(id.to_string())
    }

    pub(crate) fn log_path(&self, id: u64, task: usize) -> PathBuf {
        self.job_dir(id).join(format!("task-{task}.log"))
    }

    fn exit_path(&self, id: u64, task: usize) -> PathBuf {
        self.job_dir(id).join(format!("task-{task}.exit"))
    }

    fn persist(&self, job: &JobRecord) {
        if let Err(e) = self.inner.store.put_job(job) {
            tracing::error!(job = job.id, "cannot persist job: {e}");
        }
    }

    /// Makes state changes durable before acting on more of them (a started job must
    /// not be forgotten by a crash and started twice).
    fn flush(&self) {
        if let Err(e) = self.inner.store.flush() {
            tracing::error!("cannot flush the store: {e}");
        }
    }

    fn event(&self, job: u64, kind: &str, message: String) {
        tracing::info!(job, kind, "{message}");
        if let Err(e) = self.inner.store.event(now_ms(), Some(job), kind, message) {
            tracing::error!(job, "cannot write event: {e}");
        }
    }

    pub(crate) fn apply(&self, outcome: CycleOutcome) {
        let mut st = lock(&self.inner.state);
        st.record_faults(outcome.cycle_id, &outcome.faults, &self.inner.store);
        // Record every start durably first, then launch: a crash in between leaves a
        // job marked running without processes (re-attach marks it lost), never a
        // job that runs twice.
        let mut launch = Vec::new();
        for start in &outcome.starts {
            let Some(job) = st.jobs.get_mut(&start.job) else {
                continue;
            };
            if job.state != JobState::Pending {
                continue;
            }
            self.mark_started(job, start);
            crate::telemetry::job_event(
                job.id,
                "started",
                outcome.cycle_id,
                &format!("by {}", start.placed_by),
            );
            self.persist(job);
            launch.push(start.job);
        }
        if !launch.is_empty() {
            self.flush();
        }
        for id in launch {
            if let Some(job) = st.jobs.get_mut(&id) {
                self.launch(job);
                self.persist(job);
            }
        }
        for ev in &outcome.evictions {
            let Some(job) = st.jobs.get_mut(&ev.job) else {
                continue;
            };
            if job.state != JobState::Running || job.stopping.is_some() {
                continue;
            }
            job.stopping = Some(StopCause::Evicted {
                for_job: ev.for_job,
            });
            crate::telemetry::job_event(job.id, "evicted", outcome.cycle_id, &ev.reason.message);
            self.stop_tasks(job, Duration::from_secs(u64::from(ev.grace_s)));
            let snapshot = job.clone();
            self.persist(&snapshot);
            self.event(
                ev.job,
                "evicted",
                format!(
                    "for job {}: {} (grace {} s)",
                    ev.for_job, ev.reason.message, ev.grace_s
                ),
            );
        }
        if !outcome.starts.is_empty() || !outcome.evictions.is_empty() {
            self.flush();
        }
        // Effective priority of every admitted job, for display (not persisted each cycle).
        for (id, (tier, score)) in outcome.order.iter().zip(&outcome.priorities) {
            if let Some(job) = st.jobs.get_mut(id).filter(|j| j.state == JobState::Pending) {
                job.tier = *tier;
                job.score = *score;
            }
        }
        for (id, reason) in &outcome.pending {
            let Some(job) = st.jobs.get_mut(id) else {
                continue;
            };
            if job.state != JobState::Pending {
                continue;
            }
            let view = ReasonView {
                stage: reason.stage.as_str().to_string(),
                code: reason.code,
                message: reason.message.clone(),
                plugin: reason.plugin.clone(),
                cycle: outcome.cycle_id,
                priority_note: reason.priority_note.clone(),
            };
            let changed = job.reason.as_ref().is_none_or(|r| {
                r.code != view.code
                    || r.message != view.message
                    || r.priority_note != view.priority_note
            });
            job.reason = Some(view);
            if changed {
                let snapshot = job.clone();
                self.persist(&snapshot);
            }
        }
    }

    fn mark_started(&self, job: &mut JobRecord, start: &StartDecision) {
        job.state = JobState::Running;
        job.start_ms = Some(now_ms());
        job.end_ms = None;
        job.exit_code = None;
        job.stopping = None;
        job.reason = None;
        job.tier = start.tier;
        job.score = start.score;
        job.tasks = start
            .tasks
            .iter()
            .map(|a| TaskRecord {
                node: self.inner.node.name.clone(),
                gpus: a
                    .gpus
                    .iter()
                    .map(|g| GpuShareView {
                        index: g.index,
                        milli: g.milli,
                    })
                    .collect(),
                cpu_milli: a.cpu_milli,
                memory_mib: a.memory_mib,
                pid: None,
                exit: None,
            })
            .collect();
        let gpus: Vec<String> = job.tasks.iter().map(|t| gpu_list(&t.gpus)).collect();
        self.event(
            job.id,
            "started",
            format!(
                "by {} on {} (GPUs per task: {:?})",
                start.placed_by, self.inner.node.name, gpus
            ),
        );
    }

    fn launch(&self, job: &mut JobRecord) {
        let argv = match self.command(job) {
            Ok(a) => a,
            Err(e) => return self.launch_failed(job, format!("cannot write the job script: {e}")),
        };
        for i in 0..job.tasks.len() {
            let launch = TaskLaunch {
                job_id: job.id,
                task_index: i as u32,
                argv: argv.clone(),
                env: self.task_env(job, i),
                workdir: Some(
                    job.spec
                        .workdir
                        .clone()
                        .map(PathBuf::from)
                        .unwrap_or_else(|| self.job_dir(job.id)),
                ),
                log_path: self.log_path(job.id, i),
                exit_path: self.exit_path(job.id, i),
            };
            match self.inner.executor.launch(&launch) {
                Ok(t) => job.tasks[i].pid = Some(t.pid),
                Err(e) => {
                    return self.launch_failed(job, format!("task {i} failed to launch: {e}"));
                }
            }
        }
    }

    fn launch_failed(&self, job: &mut JobRecord, message: String) {
        tracing::error!(job = job.id, "{message}");
        job.stopping = Some(StopCause::GangFailed);
        for t in &mut job.tasks {
            match t.pid {
                Some(pid) => self.inner.executor.kill_now(pid),
                None => t.exit = Some(TaskExit::Lost),
            }
        }
        job.reason = Some(host_reason(ReasonCode::Other, message));
        if job.tasks.iter().all(|t| t.exit.is_some()) {
            self.finish(job);
        }
    }

    /// argv for the job: its argv, or its script written to the job directory.
    fn command(&self, job: &JobRecord) -> std::io::Result<Vec<String>> {
        let dir = self.job_dir(job.id);
        std::fs::create_dir_all(&dir)?;
        let Some(script) = &job.spec.script else {
            return Ok(job.spec.argv.clone());
        };
        let path = dir.join("script");
        std::fs::write(&path, script)?;
        let path = path.to_string_lossy().into_owned();
        Ok(if script.starts_with("#!") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            vec![path]
        } else {
            vec!["/bin/sh".into(), path]
        })
    }

    fn task_env(&self, job: &JobRecord, task: usize) -> Vec<(String, String)> {
        let t = &job.tasks[task];
        let mut env: Vec<(String, String)> = job
            .spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let world = job.tasks.len();
        let gpu_milli: u32 = t.gpus.iter().map(|g| g.milli).sum();
        env.extend([
            ("CUDA_VISIBLE_DEVICES".into(), gpu_list(&t.gpus)),
            ("GANTRY_JOB_ID".into(), job.id.to_string()),
            ("GANTRY_JOB_NAME".into(), job.spec.name.clone()),
            ("GANTRY_TASK_INDEX".into(), task.to_string()),
            ("GANTRY_NODE".into(), t.node.clone()),
            ("GANTRY_GPU_MILLI".into(), gpu_milli.to_string()),
            ("GANTRY_USER".into(), job.spec.user.clone()),
            ("GANTRY_ACCOUNT".into(), job.spec.account.clone()),
            ("GANTRY_QUEUE".into(), job.spec.queue.clone()),
            ("WORLD_SIZE".into(), world.to_string()),
            ("RANK".into(), task.to_string()),
            ("LOCAL_RANK".into(), task.to_string()),
            ("NODE_RANK".into(), "0".into()),
            ("MASTER_ADDR".into(), "127.0.0.1".into()),
            (
                "MASTER_PORT".into(),
                (MASTER_PORT_BASE + job.id % 10_000).to_string(),
            ),
        ]);
        env.extend(fraction_env(&t.gpus, &self.inner.node.gpus));
        env
    }

    /// Signals every launched task of `job` to stop (SIGTERM, then SIGKILL after `grace`).
    pub(crate) fn stop_tasks(&self, job: &JobRecord, grace: Duration) {
        for t in job.tasks.iter().filter(|t| t.exit.is_none()) {
            if let Some(pid) = t.pid {
                self.inner.executor.terminate(pid, grace);
            }
        }
    }

    pub(crate) fn task_ended(&self, ev: TaskEvent) {
        let mut st = lock(&self.inner.state);
        let Some(job) = st.jobs.get_mut(&ev.job_id) else {
            return;
        };
        if job.state != JobState::Running {
            return;
        }
        let Some(task) = job.tasks.get_mut(ev.task_index as usize) else {
            return;
        };
        task.exit = Some(ev.exit);
        let failed = ev.exit != TaskExit::Exited(0);
        if failed && job.stopping.is_none() && job.tasks.iter().any(|t| t.exit.is_none()) {
            job.stopping = Some(StopCause::GangFailed);
            self.stop_tasks(job, Duration::from_secs(self.inner.config.kill_grace_s));
        }
        if job.tasks.iter().all(|t| t.exit.is_some()) {
            self.finish(job);
        }
        let snapshot = job.clone();
        drop(st);
        self.persist(&snapshot);
        self.flush();
        self.wake();
    }

    /// All tasks have ended: decide the job's final state (or requeue it).
    fn finish(&self, job: &mut JobRecord) {
        let code = job.tasks.iter().find_map(|t| match t.exit {
            Some(TaskExit::Exited(0)) | None => None,
            Some(TaskExit::Exited(c)) => Some(c),
            Some(TaskExit::Signaled(s)) => Some(128 + s),
            Some(TaskExit::Lost) => Some(-1),
        });
        job.exit_code = Some(code.unwrap_or(0));
        job.end_ms = Some(now_ms());
        let (state, reason) = match job.stopping.take() {
            Some(StopCause::Cancel) => (JobState::Cancelled, "cancelled".to_string()),
            Some(StopCause::TimeLimit) => (
                JobState::TimedOut,
                format!("killed at its time limit of {} s", job.spec.time_limit_s),
            ),
            Some(StopCause::Evicted { for_job }) if job.spec.requeue => {
                job.state = JobState::Pending;
                job.requeues += 1;
                job.start_ms = None;
                job.end_ms = None;
                job.exit_code = None;
                job.reason = Some(host_reason(
                    ReasonCode::Preempted,
                    format!("evicted for job {for_job}; requeued"),
                ));
                self.event(job.id, "requeued", format!("evicted for job {for_job}"));
                crate::telemetry::job_event(
                    job.id,
                    "requeued",
                    0,
                    &format!("evicted for job {for_job}"),
                );
                return;
            }
            Some(StopCause::Evicted { for_job }) => {
                (JobState::Preempted, format!("evicted for job {for_job}"))
            }
            Some(StopCause::GangFailed) | None if code.is_some() => {
                (JobState::Failed, format!("exit code {}", code.unwrap_or(0)))
            }
            _ => (JobState::Succeeded, "exit code 0".to_string()),
        };
        job.state = state;
        crate::telemetry::job_event(
            job.id,
            "finished",
            0,
            &format!("{}: {reason}", state.as_str()),
        );
        if state != JobState::Failed || job.reason.is_none() {
            job.reason = Some(host_reason(ReasonCode::Other, reason.clone()));
        }
        self.event(job.id, state.as_str(), reason);
    }

    pub(crate) fn enforce_time_limits(&self) {
        let now = now_ms();
        let mut st = lock(&self.inner.state);
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        for job in st.jobs.values_mut() {
            let over = job.state == JobState::Running
                && job.stopping.is_none()
                && job.spec.time_limit_s > 0
                && job
                    .start_ms
                    .is_some_and(|s| now >= s + job.spec.time_limit_s * 1000);
            if over {
                job.stopping = Some(StopCause::TimeLimit);
                self.stop_tasks(job, grace);
                let snapshot = job.clone();
                self.persist(&snapshot);
                self.event(
                    job.id,
                    "time-limit",
                    format!("reached {} s; stopping", job.spec.time_limit_s),
                );
            }
        }
    }

    /// After a restart: watch the tasks that kept running; resume stops under way.
    ///
    /// A start is flushed before its tasks are launched, but their pids only reach the store
    /// with a later flush, so a SIGKILL in between leaves a running job with tasks that have no
    /// pid. Such a task may never have been launched, or its shim may be running or done: a
    /// shim is found by its exit file on its command line, an end by an exit record written
    /// since the start. A job none of whose tasks was launched goes back to the queue (it
    /// never ran, so it cannot run twice); in a gang that was partly launched, the tasks that
    /// were not are lost and the gang is stopped.
    pub(crate) fn adopt_survivors(&self) {
        let mut st = lock(&self.inner.state);
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        let mut changed = false;
        for job in st
            .jobs
            .values_mut()
            .filter(|j| j.state == JobState::Running)
        {
            let since = job.start_ms.unwrap_or(0);
            let mut unlaunched = Vec::new();
            for (i, t) in job.tasks.iter_mut().enumerate() {
                if t.pid.is_none() && t.exit.is_none() {
                    let exit_path = self.exit_path(job.id, i);
                    t.pid = self.inner.executor.find_running(&exit_path);
                    if t.pid.is_none() {
                        t.exit = self.inner.executor.exit_since(&exit_path, since);
                    }
                    match (t.pid, t.exit) {
                        (Some(pid), _) => tracing::info!(
                            job = job.id,
                            task = i,
                            pid,
                            "found the shim of a task whose pid was not stored"
                        ),
                        (None, Some(exit)) => tracing::info!(
                            job = job.id,
                            task = i,
                            ?exit,
                            "a task whose pid was not stored ended while the daemon was down"
                        ),
                        (None, None) => unlaunched.push(i),
                    }
                }
            }
            if !unlaunched.is_empty() && unlaunched.len() == job.tasks.len() {
                job.state = JobState::Pending;
                job.start_ms = None;
                job.tasks.clear();
                job.stopping = None;
                job.reason = Some(host_reason(
                    ReasonCode::Other,
                    "not launched before a daemon restart; requeued".into(),
                ));
                self.event(job.id, "requeued", "not launched before a restart".into());
                self.persist(job);
                changed = true;
                continue;
            }
            for i in unlaunched {
                job.tasks[i].exit = Some(TaskExit::Lost);
                job.stopping.get_or_insert(StopCause::GangFailed);
            }
            for (i, t) in job.tasks.iter_mut().enumerate() {
                if let (Some(pid), None) = (t.pid, t.exit) {
                    self.inner
                        .executor
                        .adopt(job.id, i as u32, pid, self.exit_path(job.id, i));
                }
            }
            if job.stopping.is_some() {
                self.stop_tasks(job, grace);
            }
            if job.tasks.iter().all(|t| t.exit.is_some()) {
                self.finish(job);
            }
            self.persist(job);
            changed = true;
            tracing::info!(job = job.id, "re-attached to running job after restart");
        }
        drop(st);
        if changed {
            self.flush();
        }
    }
}

/// For a task holding a fraction of one GPU: its device and share
/// (`GANTRY_GPU_SHARE=<index>:<milli>`), the device memory its share entitles it to
/// (`GANTRY_GPU_MEMORY_LIMIT_MIB`, when the device's memory is known) and the same
/// limits in the variables NVIDIA MPS clients honour (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`
/// for visible device 0, `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`). Whole GPUs get nothing.
pub(crate) fn fraction_env(
    gpus: &[GpuShareView],
    devices: &[crate::inventory::GpuInfo],
) -> Vec<(String, String)> {
    let [share] = gpus else {
        return Vec::new();
    };
    if share.milli >= 1000 {
        return Vec::new();
    }
    let mut env = vec![
        (
            "GANTRY_GPU_SHARE".to_string(),
            format!("{}:{}", share.index, share.milli),
        ),
        (
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".to_string(),
            (share.milli / 10).max(1).to_string(),
        ),
    ];
    let memory = devices
        .iter()
        .find(|d| d.index == share.index)
        .map_or(0, |d| d.memory_mib);
    if memory > 0 {
        let limit = memory * u64::from(share.milli) / 1000;
        env.push(("GANTRY_GPU_MEMORY_LIMIT_MIB".into(), limit.to_string()));
        env.push((
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT".into(),
            format!("0={limit}M"),
        ));
    }
    env
}

fn gpu_list(gpus: &[GpuShareView]) -> String {
    gpus.iter()
        .map(|g| g.index.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn host_reason(code: ReasonCode, message: String) -> ReasonView {
    ReasonView {
        stage: "host".into(),
        code,
        message,
        plugin: "host".into(),
        cycle: 0,
        priority_note: None,
    }
}
