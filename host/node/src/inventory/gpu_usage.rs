//! GPU use sampling: for the life of the daemon, a thread that every
//! `node.gpu_sample_every_s` seconds reads NVML's process samples (SM utilization per
//! process since the last round) and the processes holding GPU memory on each of the
//! node's devices (whole GPUs and MIG slices), groups the processes by the task whose
//! cgroup holds them (`/proc/<pid>/cgroup`, the executor's `job-<id>-task-<i>` names) and
//! hands each round over as a [`GpuUsageReport`] (the controller for its own node, the
//! agent for its heartbeat).
//!
//! A device whose driver does not give process utilization (NVML answers NOT_SUPPORTED,
//! as for MIG devices on current drivers) is left out of the round's `gpus`: its tasks'
//! use is unknown, never taken for idle.
//!
//! Owns: the sampling loop and the attribution of a pid to a task. Does not own what a
//! task's use adds up to (`gantry_api::gpu_usage`) nor which task holds which GPU (the
//! controller's `gpu_usage.rs` checks the attribution against its allocations).

use super::nvml::init;
use gantry_api::gpu_usage::{GpuUsageReport, GpuUse};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A device to sample: its schedulable index (a slice's index for a MIG device) and
/// UUID (looked up by UUID, so a renumbering cannot make it read another device).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledGpu {
    /// The index jobs are given.
    pub index: u32,
    /// Its UUID (`GPU-…` or `MIG-…`), when known.
    pub uuid: Option<String>,
}

/// Per-device state kept between rounds: NVML's timestamp of the last sample read.
#[derive(Debug, Default)]
pub struct Sampler {
    last_seen_us: BTreeMap<u32, u64>,
}

/// What a pid's cgroup says: the task it belongs to, if any.
pub type TaskOfPid = dyn Fn(u32) -> Option<(u64, u32)>;

impl Sampler {
    /// One round over `gpus` at `at_ms`; `task_of` names the task of a pid.
    pub fn round(
        &mut self,
        nvml: &Nvml,
        gpus: &[SampledGpu],
        at_ms: u64,
        every: Duration,
        task_of: &TaskOfPid,
    ) -> GpuUsageReport {
        let mut report = GpuUsageReport {
            at_ms,
            every_ms: u64::try_from(every.as_millis()).unwrap_or(u64::MAX),
            ..Default::default()
        };
        for g in gpus {
            let device = match &g.uuid {
                Some(u) => nvml.device_by_uuid(u.as_str()),
                None => nvml.device_by_index(g.index),
            };
            let device = match device {
                Ok(d) => d,
                Err(e) => {
                    tracing::debug!(gpu = g.index, "GPU use not sampled: {e}");
                    continue;
                }
            };
            let last_seen = self.last_seen_us.get(&g.index).copied();
            let Some((uses, newest)) = device_uses(&device, g.index, last_seen, task_of) else {
                continue;
            };
            if let Some(t) = newest {
                self.last_seen_us.insert(g.index, t);
            }
            report.gpus.push(g.index);
            report.uses.extend(uses);
        }
        report
    }
}

/// One device's uses grouped by task, and the newest sample timestamp read; `None` when
/// the device gives no process utilization.
fn device_uses(
    device: &Device<'_>,
    gpu: u32,
    last_seen_us: Option<u64>,
    task_of: &TaskOfPid,
) -> Option<(Vec<GpuUse>, Option<u64>)> {
    let samples = match device.process_utilization_stats(last_seen_us) {
        Ok(s) => s,
        // No process was busy since `last_seen_us`.
        Err(NvmlError::NotFound) => Vec::new(),
        Err(e) => {
            tracing::debug!(gpu, "no process utilization on this GPU: {e}");
            return None;
        }
    };
    // pid → (SM percent, memory MiB): a pid's busiest sample of the period.
    let mut per_pid: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
    let mut newest = None::<u64>;
    for s in &samples {
        let e = per_pid.entry(s.pid).or_default();
        e.0 = e.0.max(s.sm_util.min(100));
        newest = Some(newest.map_or(s.timestamp, |n| n.max(s.timestamp)));
    }
    match device.running_compute_processes() {
        Ok(procs) => {
            for p in procs {
                let mib = match p.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => bytes >> 20,
                    UsedGpuMemory::Unavailable => 0,
                };
                per_pid.entry(p.pid).or_default().1 = mib;
            }
        }
        Err(e) => tracing::debug!(gpu, "no process list on this GPU: {e}"),
    }
    let mut by_task: BTreeMap<Option<(u64, u32)>, GpuUse> = BTreeMap::new();
    for (pid, (util, mib)) in per_pid {
        let task = task_of(pid);
        let u = by_task.entry(task).or_insert_with(|| GpuUse {
            gpu,
            task,
            util_percent: 0,
            memory_mib: 0,
            processes: 0,
        });
        u.util_percent = (u.util_percent + util).min(100);
        u.memory_mib = u.memory_mib.saturating_add(mib);
        u.processes += 1;
    }
    Some((by_task.into_values().collect(), newest))
}

/// The task whose cgroup holds `pid` (`job-<id>-task-<i>`, or its container child), read
/// from `/proc/<pid>/cgroup`; `None` for a process of no task or one gone.
pub fn task_of_pid(pid: u32) -> Option<(u64, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    task_in_cgroup_file(&text)
}

/// The task named by any line of a `/proc/<pid>/cgroup` text.
fn task_in_cgroup_file(text: &str) -> Option<(u64, u32)> {
    text.lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .flat_map(|path| path.split('/'))
        .find_map(crate::executor::task_of_cgroup_name)
}

/// Samples `node`'s devices per `cfg` (only when its GPUs came from NVML and
/// `cfg.gpu_sample_every_s > 0`), handing each round to `on_report`.
pub fn sample_node(
    node: &super::NodeInfo,
    cfg: &super::NodeConfig,
    on_report: impl Fn(GpuUsageReport) + Send + 'static,
) {
    if node.gpu_source != "nvml" || cfg.gpu_sample_every_s == 0 {
        tracing::info!("GPU use sampling is off (GPUs from configuration, or every_s = 0)");
        return;
    }
    let gpus: Vec<SampledGpu> = node
        .schedulable_gpus()
        .into_iter()
        .map(|g| SampledGpu {
            index: g.index,
            uuid: g.uuid,
        })
        .collect();
    let every = Duration::from_secs(cfg.gpu_sample_every_s);
    let library = cfg.nvml_library.clone();
    let started = std::thread::Builder::new()
        .name("gantry-gpu-usage".into())
        .spawn(move || {
            let nvml = match init(library.as_deref()) {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!("GPU use sampling is off: NVML did not start ({e})");
                    return;
                }
            };
            tracing::info!(
                devices = gpus.len(),
                every_s = every.as_secs(),
                "GPU use sampling started"
            );
            let mut sampler = Sampler::default();
            loop {
                let began = Instant::now();
                let report = sampler.round(&nvml, &gpus, now_ms(), every, &task_of_pid);
                tracing::trace!(
                    took_us = began.elapsed().as_micros() as u64,
                    "GPU use round"
                );
                on_report(report);
                std::thread::sleep(every.saturating_sub(began.elapsed()));
            }
        });
    if let Err(e) = started {
        tracing::error!("cannot start GPU use sampling: {e}");
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_belongs_to_the_task_its_cgroup_names() {
        assert_eq!(
            task_in_cgroup_file("0::/gantry/job-12-task-3\n"),
            Some((12, 3))
        );
        // A task in an image runs in the container child of its cgroup.
        assert_eq!(
            task_in_cgroup_file("0::/gantry/job-7-task-0/ctr\n"),
            Some((7, 0))
        );
        // cgroup v1: any controller's line names it.
        assert_eq!(
            task_in_cgroup_file("4:memory:/gantry/job-5-task-1\n1:name=systemd:/user.slice\n"),
            Some((5, 1))
        );
        assert_eq!(
            task_in_cgroup_file("0::/user.slice/session-3.scope\n"),
            None
        );
        assert_eq!(task_in_cgroup_file("0::/job-x-task-1\n"), None);
    }
}
