//! The Alibaba "openb" GPU cluster trace (`shared/traces/alibaba-gpu-v2023/`, FGD,
//! USENIX ATC '23): node and pod CSVs, converted with the rules of
//! `docs/fgd-replay/method.md` §1 into simulator nodes and jobs. Errors name the file,
//! the line and the column.
//!
//! Owns: the CSV schemas of the trace and the pod → job conversion. Does not own the
//! FGD workload construction (`fgd_workload`) or generic workload files (`workload`).

use super::csv::{CsvError, Table};
use gantry_engine::sim::{SimJob, SimNode, SimTask};
use std::collections::BTreeMap;
use std::path::Path;

/// One pod row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Pod name.
    pub name: String,
    /// CPU request, milli-cores.
    pub cpu_milli: u32,
    /// Memory request, MiB.
    pub memory_mib: u64,
    /// GPU count n (0 for CPU-only pods).
    pub gpus: u32,
    /// Milli-GPU per GPU m (0 for CPU-only pods, at most 1000).
    pub gpu_milli: u32,
    /// Allowed GPU models (empty: any).
    pub models: Vec<String>,
    /// Creation time, s (0 when the variant has no times).
    pub creation_s: u64,
    /// Run time (deletion − scheduled), s.
    pub run_s: u64,
    /// QoS class ("" when absent).
    pub qos: String,
}

impl Pod {
    /// Total GPU request R = n·m, milli-GPU.
    pub fn gpu_request(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.gpu_milli)
    }

    /// The pod as a one-task job: whole GPUs when m = 1000, a fraction of one GPU
    /// otherwise, CPU only when n = 0. Submit and duration come from the trace times.
    pub fn to_job(&self) -> SimJob {
        let (gpus, gpu_milli) = match (self.gpus, self.gpu_milli) {
            (0, _) | (_, 0) => (0, 0),
            (n, 1000) => (n, 0),
            (_, m) => (0, m),
        };
        SimJob {
            name: self.name.clone(),
            user: self.qos.to_lowercase(),
            account: if self.qos.is_empty() {
                "openb".into()
            } else {
                self.qos.to_lowercase()
            },
            queue: "default".into(),
            tier: 0,
            kind: gantry_contract::JobKind::Batch,
            preemptible: self.qos == "BE",
            requeue: true,
            labels: BTreeMap::new(),
            submit_ms: self.creation_s * 1000,
            duration_ms: self.run_s * 1000,
            time_limit_s: 0,
            tasks: vec![SimTask {
                count: 1,
                gpus,
                gpu_milli,
                cpu_milli: self.cpu_milli,
                memory_mib: self.memory_mib,
                gpu_models: if gpus + gpu_milli == 0 {
                    Vec::new()
                } else {
                    self.models.clone()
                },
            }],
        }
    }
}

/// Where the openb CSVs are: `$GANTRY_TRACE_DIR`, else `shared/traces/alibaba-gpu-v2023`
/// next to the working directory or to the source tree, or in one of their parents.
pub fn find_trace_dir() -> Option<std::path::PathBuf> {
    if let Some(d) = std::env::var_os("GANTRY_TRACE_DIR") {
        return Some(d.into());
    }
    let rel = Path::new("shared/traces/alibaba-gpu-v2023");
    let starts = [
        std::env::current_dir().ok(),
        Some(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    starts
        .into_iter()
        .flatten()
        .flat_map(|s| s.ancestors().map(|a| a.join(rel)).collect::<Vec<_>>())
        .chain(std::iter::once(Path::new("/work").join(rel)))
        .find(|d| d.join("openb_node_list_gpu_node.csv").is_file())
}

/// Reads a node list (`sn,cpu_milli,memory_mib,gpu,model`). With `gpu_only`, nodes
/// without GPUs are left out (the FGD cluster is GPU nodes only).
pub fn read_nodes(path: &Path, gpu_only: bool) -> Result<Vec<SimNode>, CsvError> {
    let t = Table::read(path)?;
    let (sn, cpu, mem, gpu, model) = (
        t.column("sn")?,
        t.column("cpu_milli")?,
        t.column("memory_mib")?,
        t.column("gpu")?,
        t.column("model")?,
    );
    let mut nodes = Vec::new();
    for row in t.rows() {
        let gpus: u32 = row.parse(gpu)?;
        if gpu_only && gpus == 0 {
            continue;
        }
        nodes.push(SimNode {
            name: row.text(sn)?.to_string(),
            cpu_milli: row.parse(cpu)?,
            memory_mib: row.parse(mem)?,
            gpus,
            gpu_model: row.text(model)?.to_string(),
            gpu_memory_mib: 0,
            labels: BTreeMap::new(),
        });
    }
    Ok(nodes)
}

/// Reads a pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,...]`)
/// with the conversion rules of `docs/fgd-replay/method.md` §1.
pub fn read_pods(path: &Path) -> Result<Vec<Pod>, CsvError> {
    let t = Table::read(path)?;
    let (name, cpu, mem, num_gpu, gpu_milli) = (
        t.column("name")?,
        t.column("cpu_milli")?,
        t.column("memory_mib")?,
        t.column("num_gpu")?,
        t.column("gpu_milli")?,
    );
    let spec = t.optional_column("gpu_spec");
    let qos = t.optional_column("qos");
    let times = (
        t.optional_column("creation_time"),
        t.optional_column("deletion_time"),
        t.optional_column("scheduled_time"),
    );
    let mut pods = Vec::new();
    let mut open_ended: Vec<(usize, u64)> = Vec::new();
    let mut trace_end = 0u64;
    for row in t.rows() {
        let n: u32 = row.parse(num_gpu)?;
        let m_raw: i64 = row.parse(gpu_milli)?;
        let (gpus, milli) = if n == 0 {
            (0, 0)
        } else {
            (n, m_raw.clamp(0, 1000) as u32)
        };
        let models = match spec {
            Some(c) if n > 0 => row
                .text(c)?
                .split('|')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        // Empty times: never scheduled (starts at creation) or never deleted (runs to
        // the end of the trace, filled in below).
        let (creation_s, run_s) = match times {
            (Some(c), Some(d), Some(s)) => {
                let created: u64 = row.parse_or(Some(c), 0)?;
                let deleted: Option<u64> = if row.text(d)?.is_empty() {
                    None
                } else {
                    Some(row.parse(d)?)
                };
                let scheduled: u64 = row.parse_or(Some(s), created)?;
                match deleted {
                    Some(d) => (created, d.saturating_sub(scheduled)),
                    None => {
                        open_ended.push((pods.len(), scheduled));
                        (created, 0)
                    }
                }
            }
            _ => (0, 0),
        };
        if let (Some(_), Some(d)) = (times.0, times.1)
            && let Ok(d) = row.parse_or(Some(d), 0u64)
        {
            trace_end = trace_end.max(d);
        }
        pods.push(Pod {
            name: row.text(name)?.to_string(),
            cpu_milli: row.parse(cpu)?,
            memory_mib: row.parse(mem)?,
            gpus,
            gpu_milli: milli,
            models,
            creation_s,
            run_s,
            qos: qos
                .map(|c| row.text(c).map(str::to_string))
                .transpose()?
                .unwrap_or_default(),
        });
    }
    for (i, scheduled) in open_ended {
        pods[i].run_s = trace_end.saturating_sub(scheduled);
    }
    Ok(pods)
}
