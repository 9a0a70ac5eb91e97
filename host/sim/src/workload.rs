//! Gantry's own simulation inputs and the trace formats `gantry simulate` accepts:
//!
//! * cluster: a JSON array or JSONL of nodes (`{"name", "cpu_milli", "memory_mib",
//!   "gpus", "gpu_model", "labels"}`), a CSV with `name,cpu_milli,memory_mib,gpus,gpu_model`,
//!   or the openb node list (`sn,cpu_milli,memory_mib,gpu,model`);
//! * workload: JSONL, one job per line (the fields of `gantry submit`'s JSON minus
//!   `argv`/`script`/`env`/`workdir`, plus `submit_s` and `duration_s`), a CSV with
//!   `name,submit_s,duration_s,gpus[,gpu_milli,cpu_milli,memory_mib,count,user,account,queue,tier,time_limit_s,gpu_models]`,
//!   or an openb pod list (detected by its `num_gpu` column).
//!
//! Every job is checked with the same rules as a submission; an error names the
//! file, the line and the field.
//!
//! Owns: parsing and validating these files. Does not own the trace's FGD
//! construction (`fgd_workload`).

use super::csv::{CsvError, Table};
use super::openb;
use gantry_api::model::{JobSpec, TaskSpec};
use gantry_contract::JobKind;
use gantry_engine::sim::{NodeEvent, SimJob, SimNode, SimTask};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A bad input file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// CSV problem.
    #[error(transparent)]
    Csv(#[from] CsvError),
    /// The file cannot be read.
    #[error("{path}: {cause}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        cause: std::io::Error,
    },
    /// A line is malformed or a field is out of range.
    #[error("{path}:{line}: field `{field}`: {message}")]
    Field {
        /// File.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// Field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn read(path: &Path) -> Result<String, InputError> {
    std::fs::read_to_string(path).map_err(|cause| InputError::Io {
        path: path.to_path_buf(),
        cause,
    })
}

fn field_error(path: &Path, line: usize, field: &str, message: impl Into<String>) -> InputError {
    InputError::Field {
        path: path.to_path_buf(),
        line,
        field: field.into(),
        message: message.into(),
    }
}

/// Splits a serde_json error into (field, message): serde names unknown or missing
/// fields in its message, and the column locates the rest.
fn json_error(path: &Path, line: usize, e: &serde_json::Error) -> InputError {
    let msg = e.to_string();
    let field = msg
        .split('`')
        .nth(1)
        .filter(|_| msg.contains("field"))
        .unwrap_or("(line)")
        .to_string();
    field_error(path, line, &field, msg)
}

/// JSON (array) or JSONL values with their line numbers.
fn json_records<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<(usize, T)>, InputError> {
    let text = read(path)?;
    if text.trim_start().starts_with('[') {
        let items: Vec<T> =
            serde_json::from_str(&text).map_err(|e| json_error(path, e.line(), &e))?;
        return Ok(items.into_iter().map(|t| (0, t)).collect());
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with("//"))
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(|t| (i + 1, t))
                .map_err(|e| json_error(path, i + 1, &e))
        })
        .collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeLine {
    name: String,
    cpu_milli: u32,
    memory_mib: u64,
    #[serde(default)]
    gpus: u32,
    #[serde(default)]
    gpu_model: String,
    #[serde(default)]
    gpu_memory_mib: u64,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// Reads a cluster file (JSON, JSONL, Gantry CSV or openb node CSV).
pub fn read_cluster(path: &Path, gpu_only: bool) -> Result<Vec<SimNode>, InputError> {
    let nodes = if is_csv(path) {
        let t = Table::read(path)?;
        if t.optional_column("sn").is_some() {
            openb::read_nodes(path, gpu_only)?
        } else {
            let cols = (
                t.column("name")?,
                t.column("cpu_milli")?,
                t.column("memory_mib")?,
                t.column("gpus")?,
                t.optional_column("gpu_model"),
            );
            let mut nodes = Vec::new();
            for row in t.rows() {
                nodes.push(SimNode {
                    name: row.text(cols.0)?.to_string(),
                    cpu_milli: row.parse(cols.1)?,
                    memory_mib: row.parse(cols.2)?,
                    gpus: row.parse(cols.3)?,
                    gpu_model: cols
                        .4
                        .map(|c| row.text(c).map(str::to_string))
                        .transpose()?
                        .unwrap_or_default(),
                    gpu_memory_mib: 0,
                    labels: BTreeMap::new(),
                });
            }
            nodes
        }
    } else {
        json_records::<NodeLine>(path)?
            .into_iter()
            .map(|(_, n)| SimNode {
                name: n.name,
                cpu_milli: n.cpu_milli,
                memory_mib: n.memory_mib,
                gpus: n.gpus,
                gpu_model: n.gpu_model,
                gpu_memory_mib: n.gpu_memory_mib,
                labels: n.labels,
            })
            .collect()
    };
    let mut seen = std::collections::HashSet::new();
    for n in &nodes {
        if !seen.insert(n.name.as_str()) {
            return Err(field_error(
                path,
                0,
                "name",
                format!("node `{}` is listed twice", n.name),
            ));
        }
        if n.gpus > 0 && n.gpu_model.is_empty() {
            return Err(field_error(
                path,
                0,
                "gpu_model",
                format!("node `{}` has GPUs but no model", n.name),
            ));
        }
    }
    if nodes.is_empty() {
        return Err(field_error(path, 0, "(file)", "no nodes"));
    }
    Ok(nodes)
}

fn is_csv(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

/// One workload line: a job as submitted, with its virtual-time submit and duration.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobLine {
    submit_s: f64,
    duration_s: f64,
    #[serde(default)]
    name: String,
    #[serde(default = "one_task")]
    tasks: Vec<TaskSpec>,
    #[serde(default)]
    time_limit_s: u64,
    #[serde(default)]
    user: String,
    #[serde(default)]
    account: String,
    #[serde(default = "default_queue")]
    queue: String,
    #[serde(default)]
    tier: i32,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    kind: JobKind,
    #[serde(default)]
    preemptible: bool,
    #[serde(default = "yes")]
    requeue: bool,
}

fn one_task() -> Vec<TaskSpec> {
    vec![TaskSpec::default()]
}
fn default_queue() -> String {
    "default".into()
}
fn yes() -> bool {
    true
}

/// Checks a job with the submission rules and turns it into a simulator job.
fn to_sim_job(path: &Path, line: usize, j: JobLine) -> Result<SimJob, InputError> {
    for (field, v) in [("submit_s", j.submit_s), ("duration_s", j.duration_s)] {
        if !v.is_finite() || !(0.0..=1e10).contains(&v) {
            return Err(field_error(
                path,
                line,
                field,
                format!("must be 0..=1e10 seconds, got {v}"),
            ));
        }
    }
    let mut spec = JobSpec {
        name: j.name,
        argv: vec!["simulated".into()],
        script: None,
        env: BTreeMap::new(),
        workdir: None,
        tasks: j.tasks,
        time_limit_s: j.time_limit_s,
        user: j.user,
        anonymous: false,
        account: j.account,
        queue: j.queue,
        tier: j.tier,
        labels: j.labels,
        kind: j.kind,
        preemptible: j.preemptible,
        requeue: j.requeue,
        max_requeues: None,
        array: None,
        dependencies: Vec::new(),
        signal: None,
        service: None,
        hold: false,
        nodes: None,
        share_node_gpus: false,
        output: None,
        error: None,
        begin_ms: None,
        stdin: false,
        tty: None,
        image: None,
        mounts: Vec::new(),
    };
    spec.validate()
        .map_err(|e| field_error(path, line, &e.field, e.message))?;
    let name = if spec.name.is_empty() {
        format!("job-{line}")
    } else {
        spec.name
    };
    Ok(SimJob {
        name,
        user: spec.user,
        account: spec.account,
        queue: spec.queue,
        tier: spec.tier,
        kind: spec.kind,
        preemptible: spec.preemptible,
        requeue: spec.requeue,
        labels: spec.labels,
        submit_ms: (j.submit_s * 1000.0).round() as u64,
        duration_ms: (j.duration_s * 1000.0).round() as u64,
        time_limit_s: spec.time_limit_s,
        tasks: spec
            .tasks
            .into_iter()
            .map(|t| SimTask {
                count: t.count,
                gpus: t.gpus,
                gpu_milli: t.gpu_milli,
                cpu_milli: t.cpu_milli,
                memory_mib: t.memory_mib,
                gpu_models: t.gpu_models,
            })
            .collect(),
    })
}

/// Reads a workload (JSONL, Gantry CSV, or an openb pod CSV), sorted by submit time.
pub fn read_workload(path: &Path) -> Result<Vec<SimJob>, InputError> {
    let mut jobs = if is_csv(path) {
        let t = Table::read(path)?;
        if t.optional_column("num_gpu").is_some() {
            openb::read_pods(path)?
                .iter()
                .map(openb::Pod::to_job)
                .collect()
        } else {
            csv_jobs(path, &t)?
        }
    } else {
        let mut jobs = Vec::new();
        for (line, j) in json_records::<JobLine>(path)? {
            jobs.push(to_sim_job(path, line, j)?);
        }
        jobs
    };
    jobs.sort_by_key(|j| j.submit_ms);
    Ok(jobs)
}

fn csv_jobs(path: &Path, t: &Table) -> Result<Vec<SimJob>, InputError> {
    let req = (
        t.column("submit_s")?,
        t.column("duration_s")?,
        t.column("gpus")?,
    );
    let opt = |n: &str| t.optional_column(n);
    let mut jobs = Vec::new();
    for (i, row) in t.rows().enumerate() {
        let text_or = |c: Option<usize>, d: &str| -> Result<String, CsvError> {
            Ok(match c {
                Some(c) if !row.text(c)?.is_empty() => row.text(c)?.to_string(),
                _ => d.to_string(),
            })
        };
        let models = text_or(opt("gpu_models"), "")?;
        let line = JobLine {
            submit_s: row.parse(req.0)?,
            duration_s: row.parse(req.1)?,
            name: text_or(opt("name"), "")?,
            tasks: vec![TaskSpec {
                count: row.parse_or(opt("count"), 1)?,
                gpus: row.parse(req.2)?,
                gpu_milli: row.parse_or(opt("gpu_milli"), 0)?,
                cpu_milli: row.parse_or(opt("cpu_milli"), 1000)?,
                memory_mib: row.parse_or(opt("memory_mib"), 1024)?,
                gpu_models: models
                    .split('|')
                    .filter(|m| !m.is_empty())
                    .map(str::to_string)
                    .collect(),
            }],
            time_limit_s: row.parse_or(opt("time_limit_s"), 0)?,
            user: text_or(opt("user"), "")?,
            account: text_or(opt("account"), "")?,
            queue: text_or(opt("queue"), "default")?,
            tier: row.parse_or(opt("tier"), 0)?,
            labels: BTreeMap::new(),
            kind: JobKind::Batch,
            preemptible: row.parse_or(opt("preemptible"), false)?,
            requeue: true,
        };
        // Data lines start after the header; count it.
        jobs.push(to_sim_job(path, i + 2, line)?);
    }
    Ok(jobs)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeEventLine {
    at_s: f64,
    node: String,
    up: bool,
}

/// Reads node events: JSONL lines `{"at_s": 3600, "node": "n1", "up": false}`.
pub fn read_node_events(path: &Path, nodes: &[SimNode]) -> Result<Vec<NodeEvent>, InputError> {
    let mut out = Vec::new();
    for (line, e) in json_records::<NodeEventLine>(path)? {
        if !nodes.iter().any(|n| n.name == e.node) {
            return Err(field_error(
                path,
                line,
                "node",
                format!("no node named `{}` in the cluster", e.node),
            ));
        }
        if !e.at_s.is_finite() || e.at_s < 0.0 {
            return Err(field_error(
                path,
                line,
                "at_s",
                "must be a time ≥ 0 in seconds",
            ));
        }
        out.push(NodeEvent {
            at_ms: (e.at_s * 1000.0).round() as u64,
            node: e.node,
            up: e.up,
        });
    }
    Ok(out)
}
