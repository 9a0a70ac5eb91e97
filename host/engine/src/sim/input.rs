//! What a simulation is given: the cluster (nodes with GPUs, CPU, memory, labels), the
//! workload (jobs with submit time, duration and resources) and node down/up events.
//! Plain data in the user's terms (strings, seconds), before interning.
//!
//! Owns: the input types and their conversion to contract types. Does not own file
//! formats (the daemon's `simulate` command parses JSONL, CSV and the Alibaba trace).

use gantry_contract::{JobKind, TaskGroup};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One node of the simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimNode {
    /// Unique name.
    pub name: String,
    /// CPU in milli-cores.
    pub cpu_milli: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Number of GPUs.
    pub gpus: u32,
    /// Model of the node's GPUs ("" when it has none).
    #[serde(default)]
    pub gpu_model: String,
    /// Device memory per GPU in MiB.
    #[serde(default)]
    pub gpu_memory_mib: u64,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// One task group of a simulated job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimTask {
    /// Identical tasks.
    pub count: u32,
    /// Whole GPUs per task.
    pub gpus: u32,
    /// Fraction of one GPU per task (1..=999) when `gpus` is 0.
    pub gpu_milli: u32,
    /// CPU per task in milli-cores.
    pub cpu_milli: u32,
    /// Memory per task in MiB.
    pub memory_mib: u64,
    /// Allowed GPU models; empty means any.
    #[serde(default)]
    pub gpu_models: Vec<String>,
}

impl SimTask {
    /// The contract task group, with models as a mask over `models`.
    pub fn to_group(&self, models: &[String]) -> TaskGroup {
        let gpu_model_mask =
            self.gpu_models
                .iter()
                .fold(0u64, |mask, m| match models.iter().position(|x| x == m) {
                    Some(i) if i < 64 => mask | (1u64 << i),
                    _ => mask,
                });
        // A model list that names only unknown models must not become "any".
        let gpu_model_mask = if !self.gpu_models.is_empty() && gpu_model_mask == 0 {
            1u64 << 63
        } else {
            gpu_model_mask
        };
        TaskGroup {
            count: self.count,
            gpus: self.gpus,
            gpu_milli: self.gpu_milli,
            cpu_milli: self.cpu_milli,
            memory_mib: self.memory_mib,
            gpu_model_mask,
        }
    }

    /// GPU demand of one task in milli-GPU.
    pub fn gpu_milli_per_task(&self) -> u64 {
        if self.gpus > 0 {
            u64::from(self.gpus) * 1000
        } else {
            u64::from(self.gpu_milli)
        }
    }
}

/// One job of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimJob {
    /// Name.
    pub name: String,
    /// User.
    pub user: String,
    /// Account charged.
    pub account: String,
    /// Queue.
    pub queue: String,
    /// Tier (higher first).
    pub tier: i32,
    /// Kind of work.
    pub kind: JobKind,
    /// May a preemption policy evict it.
    pub preemptible: bool,
    /// Back to the queue when evicted or when its node goes down.
    pub requeue: bool,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Submit time, ms from the start of the simulation.
    pub submit_ms: u64,
    /// How long it runs once started, ms (a service runs until the end of the run).
    pub duration_ms: u64,
    /// Wall-clock limit in seconds; 0 means none. A job whose duration exceeds it is
    /// stopped at the limit.
    pub time_limit_s: u64,
    /// The gang.
    pub tasks: Vec<SimTask>,
}

impl SimJob {
    /// Total GPU demand in milli-GPU.
    pub fn gpu_milli_total(&self) -> u64 {
        self.tasks
            .iter()
            .map(|t| t.gpu_milli_per_task() * u64::from(t.count))
            .sum()
    }

    /// How long it holds resources once started: its duration, cut at its time limit.
    pub fn run_ms(&self) -> u64 {
        match self.time_limit_s {
            0 => self.duration_ms,
            limit => self.duration_ms.min(limit.saturating_mul(1000)),
        }
    }
}

/// A node goes down (its jobs are killed; requeued if they allow it) or comes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEvent {
    /// When, ms from the start of the simulation.
    pub at_ms: u64,
    /// The node's name.
    pub node: String,
    /// True: the node comes up; false: it goes down.
    pub up: bool,
}

/// GPU models of the cluster first (in node order), then models only jobs name.
pub fn model_list(nodes: &[SimNode], jobs: &[SimJob]) -> Vec<String> {
    let mut models: Vec<String> = Vec::new();
    let named = nodes
        .iter()
        .filter(|n| n.gpus > 0)
        .map(|n| n.gpu_model.as_str())
        .chain(
            jobs.iter()
                .flat_map(|j| &j.tasks)
                .flat_map(|t| t.gpu_models.iter().map(String::as_str)),
        );
    for m in named {
        if !m.is_empty() && !models.iter().any(|x| x == m) && models.len() < 63 {
            models.push(m.to_string());
        }
    }
    models
}
