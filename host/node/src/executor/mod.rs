//! Local execution of tasks as real processes (README "Isolation"): the daemon starts each task through a
//! shim (`<daemon exe> task-shim ...`) that leads a new process group, appends the task's output to
//! its log and records its end in an exit file; the executor reports that end as a [`TaskEvent`]
//! with what the task used, re-attaches to shims after a daemon restart ([`Executor::adopt`]), and
//! stops tasks by signalling the whole group (SIGTERM, grace, SIGKILL). With cgroups, each task
//! gets its own cgroup (limits and GPU device fencing) that its command joins before it execs and
//! that is emptied and removed when the task ends; as root, a task can run as its job's user.
//!
//! Owns the public API, process launch, waiting and adoption. It does not own the shim's own run
//! (`shim.rs`, `shim_args.rs`, `child.rs`), raw signal calls (`signals.rs`), the exit file format
//! (`record.rs`), cgroups (`cgroup.rs`, `usage.rs`, `bpf.rs`, `devices.rs`), the isolation
//! decision (`isolation.rs`), user look-up (`identity.rs`), nor what a task's end means
//! (`ending.rs`), nor its public types (`types.rs`); nor GPU assignment or the task's environment, which the caller puts in
//! [`TaskLaunch`].

mod bpf;
mod cgroup;
mod check;
mod child;
mod command_file;
mod container_launch;
mod devices;
mod ending;
mod environment;
mod identity;
mod isolation;
mod log_cap;
mod mig_caps;
mod naming;
mod record;
mod scratch;
mod shim;
mod shim_args;
mod shim_exe;
mod shim_input;
mod shim_signals;
pub(crate) mod signals;
mod spawn_shim;
pub mod task_files;
pub mod task_input;
pub mod task_order;
#[cfg(any(test, feature = "test-support"))]
pub mod test_shim;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_isolation;
#[cfg(test)]
mod tests_mig_fence;
mod types;
mod usage;

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

pub use bpf::BpfError;
pub use cgroup::{CgroupError, CgroupVersion};
pub use check::CheckError;
pub use devices::DeviceId;
pub use identity::{IdentityError, TaskIdentity};
pub use isolation::{Isolation, IsolationError, IsolationSummary};
pub use mig_caps::MigCaps;
pub use naming::SHIM_SUBCOMMAND;
pub(crate) use naming::task_key as task_of_cgroup_name;
pub use shim::{IMAGE_FAILED_CODE, run_shim};
pub use shim_exe::{SHIM_BINARY, shim_executable};
pub use task_input::{InputError, InputFrame, TaskInput};
pub use types::{ExecError, RunningTask, TaskEvent, TaskExit, TaskLaunch, TaskUsage};

use cgroup::TaskCgroup;
use shim_args::ShimArgs;

/// How often [`Executor::adopt`] checks whether an adopted shim is still running.
const ADOPT_POLL: Duration = Duration::from_millis(200);

/// How often [`Executor::terminate`] checks, during the grace period, whether the group is gone.
const GRACE_POLL: Duration = Duration::from_millis(50);

/// Tasks whose end an executor is waiting for (job id, task index): their cgroups are theirs.
type Watched = Arc<Mutex<std::collections::BTreeSet<(u64, u32)>>>;

/// Starts tasks as process groups led by a shim, and reports their ends.
#[derive(Debug, Clone)]
pub struct Executor {
    shim_exe: PathBuf,
    events: UnboundedSender<TaskEvent>,
    isolation: Arc<Isolation>,
    watched: Watched,
    /// Size limit of each task's log (`limits.max_log_mib`); none without
    /// [`Executor::with_log_limit`].
    log_max_bytes: Option<u64>,
    /// Size of the scratch tmpfs of a task run as another user without a `workdir`
    /// (`execution.work_dir_mib`; 0: a plain directory, unbounded).
    scratch_mib: u64,
    /// How tasks in images run here (`[containers]`); none: image tasks are refused.
    containers: Option<Arc<crate::container::Containers>>,
}

impl Executor {
    /// `shim_exe`: path of the executable to run as the shim (the daemon passes
    /// `std::env::current_exe()`); events are sent on `events`. No cgroups, no change of user.
    pub fn new(shim_exe: PathBuf, events: UnboundedSender<TaskEvent>) -> Self {
        Self::with_isolation(shim_exe, events, Isolation::none())
    }

    /// Like [`Executor::new`], with the isolation decided at start ([`Isolation::setup`]).
    pub fn with_isolation(
        shim_exe: PathBuf,
        events: UnboundedSender<TaskEvent>,
        isolation: Isolation,
    ) -> Self {
        Self {
            shim_exe,
            events,
            isolation: Arc::new(isolation),
            watched: Arc::default(),
            log_max_bytes: None,
            scratch_mib: 0,
            containers: None,
        }
    }

    /// Each task's log holds at most `max_bytes` (the shim copies the output up to it, then
    /// writes one line saying the log was cut and discards the rest).
    pub fn with_log_limit(mut self, max_bytes: u64) -> Self {
        self.log_max_bytes = Some(max_bytes);
        self
    }

    /// Runs tasks that name an image with `containers` (`[containers]`, detected at start).
    pub fn with_containers(mut self, containers: crate::container::Containers) -> Self {
        self.containers = Some(Arc::new(containers));
        self
    }

    /// Why a task in an image cannot run on this node, if it cannot.
    pub fn containers_unavailable(&self) -> Option<String> {
        match &self.containers {
            None => Some("containers are not set up on this node".into()),
            Some(c) => c.unavailable(),
        }
    }

    /// The `[containers]` settings in force (none: image tasks are refused).
    pub fn containers(&self) -> Option<&crate::container::Containers> {
        self.containers.as_deref()
    }

    /// A task run as another user without a `workdir` of its own works in a tmpfs of
    /// `mib` ([`task_files::workdir`]); 0 keeps a plain directory on the data dir's file system.
    pub fn with_scratch_limit(mut self, mib: u64) -> Self {
        self.scratch_mib = mib;
        self
    }

    /// The working directory of a task of a job whose own is `own` (none: the scratch
    /// directory under `dir`, [`task_files::workdir`]).
    pub fn workdir(
        &self,
        own: Option<&str>,
        dir: &Path,
        identity: Option<&TaskIdentity>,
    ) -> std::io::Result<PathBuf> {
        task_files::workdir(own, dir, identity, self.scratch_mib)
    }

    /// The run of the task directory `dir` has ended: its scratch tmpfs, if any, is
    /// unmounted and what was in it is gone; whether there was one.
    pub fn release_workdir(&self, dir: &Path) -> std::io::Result<bool> {
        scratch::release(dir)
    }

    /// The directories under `root` whose scratch tmpfs is mounted (`scratch::mounted_under`).
    pub fn scratch_mounts_under(&self, root: &Path) -> Vec<PathBuf> {
        scratch::mounted_under(root)
    }

    /// When tasks run as their users: the directory at or above `data_dir` (where their
    /// directories are) that other users may not search, warned about once here. Each task of
    /// another user would fail to start (`Permission denied`, exit 127), as under a 0700
    /// `mktemp -d` or a private home. The daemon calls it at start.
    pub fn warn_if_tasks_cannot_reach(&self, data_dir: &Path) -> Option<task_files::Blocked> {
        if !self.isolation.summary().run_as_user {
            return None;
        }
        let blocked = task_files::blocking_ancestor(data_dir, task_files::Searcher::OTHERS)?;
        tracing::warn!(
            data_dir = %data_dir.display(),
            "tasks run as their users, but other users cannot enter the data directory: {blocked}; a task of any other user will fail to start (Permission denied, exit 127) until the data directory lies under directories every user may enter (e.g. /var/lib/gantry), or that one is opened (chmod o+x)"
        );
        Some(blocked)
    }

    /// Fences MIG slices by the capabilities of `gpus`' current MIG layout (after a change).
    pub fn refresh_mig_caps(&self, gpus: &[gantry_api::node::GpuInfo]) {
        self.isolation.set_mig_caps(MigCaps::read(gpus));
    }

    /// The isolation in effect.
    pub fn isolation(&self) -> IsolationSummary {
        self.isolation.summary()
    }

    /// Who a task of the job user `user` runs as: `None` (the daemon's user) unless the daemon
    /// is root and `execution.run_as_user` is on; an error when the job may not run (root
    /// without `allow_root`, no account and no fallback). `anonymous`: the job was submitted
    /// without an identity, so it runs as `execution.fallback_user`, never as `user`.
    pub fn identity(
        &self,
        user: &str,
        anonymous: bool,
    ) -> Result<Option<TaskIdentity>, IdentityError> {
        self.isolation.identity(user, anonymous)
    }

    /// After a restart, once every surviving task was adopted: kills what is left in the task
    /// cgroups this executor is not waiting for (tasks that ended or were lost while the daemon
    /// was down) and removes those cgroups.
    pub fn sweep_cgroups(&self) {
        let Some(version) = self.isolation.cgroups() else {
            return;
        };
        let watched = lock(&self.watched).clone();
        for name in cgroup::task_cgroups(version, self.isolation.parent()) {
            let key = naming::task_key(&name);
            if key.is_some_and(|k| watched.contains(&k)) {
                continue;
            }
            tracing::info!(cgroup = %name, "removing the cgroup of a task that no longer runs");
            TaskCgroup::open(version, &name).destroy();
        }
    }

    /// Starts `l` as `shim_exe task-shim --exit-file E --log L --env-file V [--workdir D] --
    /// argv...` in a new process group. The shim starts with `PATH` only; the command's
    /// environment (`environment::task_env`: a base of the daemon's choosing, then `l.env`) is
    /// written to `V` (next to the exit record, `.env`, mode 0600) and applied by the shim to
    /// the command alone, after the switch to the task's user. A stale exit record at
    /// `l.exit_path` is removed first. A background task waits for the shim and sends one
    /// [`TaskEvent`]: the exit record if there is one, else the shim's own status (e.g.
    /// `Signaled(9)` if it was killed). Must be called from within a tokio runtime.
    pub fn launch(&self, l: &TaskLaunch) -> Result<RunningTask, ExecError> {
        if l.argv.is_empty() {
            return Err(ExecError::EmptyArgv);
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ExecError::NoRuntime)?;
        utf8(&l.exit_path)?;
        utf8(&l.log_path)?;
        l.workdir.as_deref().map(utf8).transpose()?;
        create_parent(&l.log_path)?;
        create_parent(&l.exit_path)?;
        record::remove_stale(&l.exit_path).map_err(|source| ExecError::Prepare {
            path: l.exit_path.clone(),
            source,
        })?;
        let env_file = l.exit_path.with_extension("env");
        let env = environment::task_env(
            l.identity.as_ref(),
            self.isolation.env_passthrough(),
            &l.env,
        );
        environment::write_file(&env_file, &env).map_err(|source| ExecError::Prepare {
            path: env_file.clone(),
            source,
        })?;
        let argv_file = l.exit_path.with_extension("argv");
        command_file::write(&argv_file, &l.argv).map_err(|source| ExecError::Prepare {
            path: argv_file.clone(),
            source,
        })?;
        let input_fifo = (l.input != TaskInput::None).then(|| task_input::fifo_path(&l.exit_path));
        if let Some(fifo) = &input_fifo {
            task_input::create_fifo(fifo).map_err(|source| ExecError::Prepare {
                path: fifo.clone(),
                source,
            })?;
        }
        let key = (l.job_id, l.task_index);
        lock(&self.watched).insert(key);
        let cgroup = match self.task_cgroup(l) {
            Ok(cgroup) => cgroup,
            Err(e) => {
                lock(&self.watched).remove(&key);
                return Err(e);
            }
        };
        let container = match &l.image {
            None => None,
            Some(image) => {
                let prepared = self
                    .containers
                    .as_deref()
                    .ok_or_else(|| ExecError::Container("containers are not set up".into()))
                    .and_then(|c| {
                        let name = cgroup.as_ref().map(|_| {
                            cgroup::task_name(self.isolation.parent(), l.job_id, l.task_index)
                        });
                        container_launch::write_request(
                            c,
                            l,
                            image,
                            name.as_deref(),
                            self.isolation.allow_root(),
                            |g| self.isolation.gpu_device(g),
                        )
                    });
                match prepared {
                    Ok(path) => Some(path),
                    Err(e) => {
                        if let Some(cg) = &cgroup {
                            cg.destroy();
                        }
                        lock(&self.watched).remove(&key);
                        return Err(e);
                    }
                }
            }
        };
        let args = ShimArgs {
            exit_file: l.exit_path.clone(),
            log: l.log_path.clone(),
            log_max_bytes: self.log_max_bytes,
            env_file: Some(env_file),
            // In an image the directory is the container's (in the request), never entered
            // on the host by the runtime's root.
            workdir: if container.is_some() {
                None
            } else {
                l.workdir.clone()
            },
            cgroup_procs: cgroup
                .as_ref()
                .map(TaskCgroup::procs_files)
                .unwrap_or_default(),
            ids: l.identity.as_ref().map(|i| child::Ids {
                uid: i.uid,
                gid: i.gid,
                groups: i.groups.clone(),
            }),
            input: l.input,
            input_fifo,
            stdout_file: l.stdout_file.clone(),
            stderr_file: l.stderr_file.clone(),
            argv_file: Some(argv_file),
            argv: Vec::new(),
            container,
        };
        // The shim runs as root: nothing of the job's (nor the daemon's secrets) in its
        // environment. It leads a session of its own (no controlling terminal; its process
        // group is the one `terminate` signals) and inherits no descriptor above 2.
        let spawned = spawn_shim::spawn(
            &self.shim_exe,
            &shim_args::build(&args),
            &environment::shim_env(),
        )
        .map_err(|source| ExecError::Spawn {
            exe: self.shim_exe.clone(),
            source,
        });
        let shim = match spawned {
            Ok(shim) => shim,
            Err(e) => {
                if let Some(cg) = &cgroup {
                    cg.destroy();
                }
                lock(&self.watched).remove(&key);
                return Err(e);
            }
        };
        let pid = shim.pid;
        tracing::debug!(
            job_id = l.job_id,
            task_index = l.task_index,
            pid,
            "task started"
        );

        let end = self.ending(l.job_id, l.task_index, l.exit_path.clone());
        runtime.spawn(async move {
            let status = shim.wait().await;
            let fallback = match status {
                Ok(status) => record::exit_from_status(status),
                Err(e) => {
                    tracing::warn!(job_id = end.job_id, task_index = end.task_index, pid, error = %e, "cannot wait for task shim");
                    TaskExit::Lost
                }
            };
            end.conclude(fallback).await;
        });
        Ok(RunningTask { pid })
    }

    /// The cgroup of a task about to start, when tasks get cgroups.
    fn task_cgroup(&self, l: &TaskLaunch) -> Result<Option<TaskCgroup>, ExecError> {
        let Some(version) = self.isolation.cgroups() else {
            return Ok(None);
        };
        let name = cgroup::task_name(self.isolation.parent(), l.job_id, l.task_index);
        let limits = self.isolation.limits(l.memory_mib, l.cpu_milli, &l.gpus);
        Ok(Some(TaskCgroup::create(version, &name, &limits)?))
    }

    fn ending(&self, job_id: u64, task_index: u32, exit_path: PathBuf) -> ending::Ending {
        ending::Ending {
            job_id,
            task_index,
            exit_path,
            cgroup: self.isolation.cgroups().map(|v| {
                (
                    v,
                    cgroup::task_name(self.isolation.parent(), job_id, task_index),
                )
            }),
            events: self.events.clone(),
            watched: self.watched.clone(),
        }
    }

    /// Re-attaches to a shim started before a daemon restart: polls every 200 ms until `pid` is
    /// gone (a zombie counts as gone; so does a live process whose command line does not contain
    /// `exit_path`, i.e. a reused pid), then sends the exit read from `exit_path`, or `Lost` if
    /// there is none. `exit_path` must be the same path that was given to [`Executor::launch`].
    pub fn adopt(&self, job_id: u64, task_index: u32, pid: u32, exit_path: PathBuf) {
        lock(&self.watched).insert((job_id, task_index));
        let end = self.ending(job_id, task_index, exit_path);
        spawn_background("adopt", async move {
            while signals::shim_alive(pid, &end.exit_path) {
                tokio::time::sleep(ADOPT_POLL).await;
            }
            end.conclude(TaskExit::Lost).await;
        });
    }

    /// After a restart, the pid of a still-running shim that writes `exit_path` (one launched
    /// by the previous daemon whose pid was not yet durable), if there is one.
    pub fn find_running(&self, exit_path: &Path) -> Option<u32> {
        signals::find_shim(exit_path)
    }

    /// After a restart, the exit recorded at `exit_path` if the record was written at or after
    /// `since_ms` (ms since the Unix epoch): the end of a run that started then, not a stale
    /// record of an earlier run of the same task.
    pub fn exit_since(&self, exit_path: &Path, since_ms: u64) -> Option<TaskExit> {
        let written = std::fs::metadata(exit_path)
            .and_then(|m| m.modified())
            .ok()?;
        let written_ms = written
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        (written_ms >= since_ms)
            .then(|| record::read_or_warn(exit_path))
            .flatten()
            .map(|r| r.exit)
    }

    /// The exit recorded at `exit_path` and what the task used as its shim measured it (zero
    /// when the record has none); `None` when there is no readable record.
    pub fn recorded_exit(&self, exit_path: &Path) -> Option<(TaskExit, TaskUsage)> {
        record::read_or_warn(exit_path).map(|r| (r.exit, r.usage.unwrap_or_default()))
    }

    /// Sends SIGTERM to the process group `pid`, then SIGKILL to the group after `grace` if any
    /// member is still alive (checked from a background task, which stops early once the group
    /// is gone). Pids 0 and 1 are refused.
    pub fn terminate(&self, pid: u32, grace: Duration) {
        self.terminate_with(pid, libc::SIGTERM, grace);
    }

    /// Sends `signal` (e.g. a job's checkpoint signal) to the process group `pid` now, without
    /// a follow-up. Pids 0 and 1 are refused.
    pub fn signal(&self, pid: u32, signal: i32) -> io::Result<()> {
        signals::signal_group(pid, signal)
    }

    /// Sends `signal` to the processes of task group `pid` that `scope` names: all of them,
    /// all but the task's command (a script's shell), or that command alone.
    pub fn signal_scoped(
        &self,
        pid: u32,
        signal: i32,
        scope: gantry_api::model::job_options::SignalScope,
    ) -> io::Result<()> {
        use gantry_api::model::job_options::SignalScope;
        match scope {
            SignalScope::Group => signals::signal_group(pid, signal),
            SignalScope::Steps => signals::signal_part_of_group(pid, signal, false).map(|_| ()),
            SignalScope::BatchShell => signals::signal_part_of_group(pid, signal, true).map(|_| ()),
        }
    }

    /// Like [`Executor::terminate`], with `first` instead of SIGTERM as the first signal.
    pub fn terminate_with(&self, pid: u32, first: i32, grace: Duration) {
        // Taken before the signal: the group's leader (the shim) as it is now, so that the
        // SIGKILL below never reaches a group that reused the number after ours ended.
        let leader_start = signals::start_time(pid);
        if let Err(e) = signals::signal_group(pid, first) {
            tracing::debug!(pid, signal = first, error = %e, "signal to task group failed");
            if e.raw_os_error() == Some(libc::ESRCH) || e.kind() == io::ErrorKind::InvalidInput {
                return;
            }
        }
        spawn_background("terminate", async move {
            let deadline = tokio::time::Instant::now() + grace;
            loop {
                if !signals::same_group(pid, leader_start) {
                    return;
                }
                let now = tokio::time::Instant::now();
                if now >= deadline {
                    break;
                }
                tokio::time::sleep(GRACE_POLL.min(deadline - now)).await;
            }
            tracing::info!(pid, "task group outlived its grace period; sending SIGKILL");
            kill_group(pid);
        });
    }

    /// Sends SIGKILL to the whole process group `pid` now. Pids 0 and 1 are refused.
    pub fn kill_now(&self, pid: u32) {
        kill_group(pid);
    }
}

fn kill_group(pid: u32) {
    if let Err(e) = signals::signal_group(pid, libc::SIGKILL) {
        tracing::debug!(pid, error = %e, "SIGKILL to task group failed");
    }
}

/// Locks `m`, recovering the data of a poisoned lock (the sets it guards stay consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn utf8(path: &Path) -> Result<&str, ExecError> {
    path.to_str()
        .ok_or_else(|| ExecError::NonUtf8Path(path.to_path_buf()))
}

fn create_parent(path: &Path) -> Result<(), ExecError> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => std::fs::create_dir_all(parent).map_err(|source| ExecError::Prepare {
            path: parent.to_path_buf(),
            source,
        }),
        None => Ok(()),
    }
}

/// Runs `fut` on the current tokio runtime, or on a small thread of its own outside one (so that
/// `adopt` and `terminate` also work when called from synchronous code).
fn spawn_background<F>(what: &'static str, fut: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(fut);
        return;
    }
    let spawned = std::thread::Builder::new()
        .name(format!("executor-{what}"))
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
            {
                Ok(rt) => rt.block_on(fut),
                Err(e) => tracing::error!(what, error = %e, "cannot build executor runtime"),
            }
        });
    if let Err(e) = spawned {
        tracing::error!(what, error = %e, "cannot spawn executor thread");
    }
}
