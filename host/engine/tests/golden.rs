//! Golden scenarios: every `tests/golden/*.json` file holds a snapshot (as the serde
//! JSON of [`Snapshot`]), a small pipeline description, and the expected outcome. The
//! runner runs one cycle with the bundled native plugins and compares starts (in plan
//! order, with every allocation), pending reason codes (by job), evictions and the
//! priority order exactly. Every mismatch of every file is reported, each section as
//! a `-expected` / `+actual` diff, followed by the actual outcome in the file's
//! `expected` format so an intended change can be pasted back after review.
//!
//! File format:
//! ```text
//! { "description": "...",
//!   "pipeline": { "priority": "fifo" | "none" | "fixed",        (default "fifo")
//!                 "scores": {"<job>": f64}, "tiers": {"<job>": i32},   ("fixed" only)
//!                 "placement_config": "{\"strict\": false}",   (default "{}")
//!                 "preemption": bool, "preemption_config": "{}" },
//!   "snapshot": <Snapshot>,
//!   "expected": { "order": [job...],
//!                 "starts": [{"job", "tasks": [TaskAllocation...]}],
//!                 "pending": [{"job", "code", "message_contains"?}],
//!                 "evictions": [{"job", "for_job"}] } }
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use gantry_contract::{Cycle, Job, JobId, Priority, ReasonCode, Scored, TaskAllocation};
use gantry_engine::{
    CycleOutcome, Identified, Pipeline, PluginIdent, PolicyFault, PriorityStage, Snapshot,
    StageSlot, run_cycle,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    description: String,
    #[serde(default)]
    pipeline: PipelineSpec,
    snapshot: Snapshot,
    expected: Expected,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum PriorityKind {
    /// The `fifo` plugin.
    #[default]
    Fifo,
    /// An empty priority chain (every score 0: the host's tie-breaks decide).
    None,
    /// A test stage returning the scores and tier overrides of the spec.
    Fixed,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct PipelineSpec {
    priority: PriorityKind,
    scores: HashMap<JobId, f64>,
    tiers: HashMap<JobId, i32>,
    placement_config: Option<String>,
    preemption: bool,
    preemption_config: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Expected {
    order: Vec<JobId>,
    #[serde(default)]
    starts: Vec<ExpectedStart>,
    #[serde(default)]
    pending: Vec<ExpectedPending>,
    #[serde(default)]
    evictions: Vec<ExpectedEviction>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ExpectedStart {
    job: JobId,
    tasks: Vec<TaskAllocation>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ExpectedPending {
    job: JobId,
    code: ReasonCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message_contains: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ExpectedEviction {
    job: JobId,
    for_job: JobId,
}

/// A priority stage that returns fixed scores (0 when absent) and tier overrides.
struct FixedScores {
    ident: PluginIdent,
    scores: HashMap<JobId, f64>,
    tiers: HashMap<JobId, i32>,
}

impl Identified for FixedScores {
    fn ident(&self) -> &PluginIdent {
        &self.ident
    }
}

impl Priority<PolicyFault> for FixedScores {
    fn score(
        &mut self,
        _ctx: &Cycle,
        jobs: &[Job],
        _previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        Ok(jobs
            .iter()
            .map(|j| Scored {
                score: self.scores.get(&j.id).copied().unwrap_or_default(),
                tier: self.tiers.get(&j.id).copied(),
                note: None,
            })
            .collect())
    }
}

fn build_pipeline(spec: &PipelineSpec) -> Pipeline {
    let priority: Vec<StageSlot<dyn PriorityStage>> = match spec.priority {
        PriorityKind::Fifo => vec![common::fifo()],
        PriorityKind::None => vec![],
        PriorityKind::Fixed => vec![StageSlot::new(
            Box::new(FixedScores {
                ident: PluginIdent {
                    name: "fixed-scores".into(),
                    version: "0".into(),
                    sha256: "native".into(),
                },
                scores: spec.scores.clone(),
                tiers: spec.tiers.clone(),
            }),
            "{}",
        )],
    };
    Pipeline {
        admission: vec![],
        priority,
        placement: common::first_fit(spec.placement_config.as_deref().unwrap_or("{}")),
        preemption: spec
            .preemption
            .then(|| common::priority_preempt(spec.preemption_config.as_deref().unwrap_or("{}"))),
    }
}

fn actual_expected(out: &CycleOutcome, want: &Expected) -> Expected {
    // Keep `message_contains` from the file when the actual message satisfies it, so
    // the printed block only differs where the outcome does.
    let wanted_msg: HashMap<JobId, &str> = want
        .pending
        .iter()
        .filter_map(|p| Some((p.job, p.message_contains.as_deref()?)))
        .collect();
    let mut pending: Vec<ExpectedPending> = out
        .pending
        .iter()
        .map(|(job, r)| ExpectedPending {
            job: *job,
            code: r.code,
            message_contains: wanted_msg
                .get(job)
                .filter(|m| r.message.contains(**m))
                .map(|m| m.to_string()),
        })
        .collect();
    pending.sort_by_key(|p| p.job);
    Expected {
        order: out.order.clone(),
        starts: out
            .starts
            .iter()
            .map(|s| ExpectedStart {
                job: s.job,
                tasks: s.tasks.clone(),
            })
            .collect(),
        pending,
        evictions: out
            .evictions
            .iter()
            .map(|e| ExpectedEviction {
                job: e.job,
                for_job: e.for_job,
            })
            .collect(),
    }
}

fn alloc_line(a: &TaskAllocation) -> String {
    let gpus: Vec<String> = a
        .gpus
        .iter()
        .map(|g| format!("{}:{}", g.index, g.milli))
        .collect();
    format!(
        "node {} gpus [{}] cpu {} mem {}",
        a.node,
        gpus.join(" "),
        a.cpu_milli,
        a.memory_mib
    )
}

fn lines(e: &Expected) -> BTreeMap<&'static str, Vec<String>> {
    let mut m = BTreeMap::new();
    m.insert("order", vec![format!("{:?}", e.order)]);
    let mut starts = Vec::new();
    for s in &e.starts {
        starts.push(format!("job {} ({} tasks)", s.job, s.tasks.len()));
        for (i, a) in s.tasks.iter().enumerate() {
            starts.push(format!("job {} task {i}: {}", s.job, alloc_line(a)));
        }
    }
    m.insert("starts", starts);
    let mut pending: Vec<(JobId, String)> = e
        .pending
        .iter()
        .map(|p| {
            let msg = p
                .message_contains
                .as_deref()
                .map(|m| format!(" (message contains {m:?})"))
                .unwrap_or_default();
            (p.job, format!("job {}: {}{msg}", p.job, p.code.as_str()))
        })
        .collect();
    pending.sort();
    m.insert("pending", pending.into_iter().map(|(_, l)| l).collect());
    m.insert(
        "evictions",
        e.evictions
            .iter()
            .map(|v| format!("evict {} for {}", v.job, v.for_job))
            .collect(),
    );
    m
}

/// A line diff per section: lines only expected (`-`), only actual (`+`), or, when
/// both hold the same lines in another order, both lists in full.
fn diff(want: &Expected, got: &Expected) -> String {
    let (w, g) = (lines(want), lines(got));
    let mut text = String::new();
    for (section, wl) in &w {
        let gl = &g[section];
        if wl == gl {
            continue;
        }
        let _ = writeln!(text, "  {section}:");
        let missing: Vec<&String> = wl.iter().filter(|l| !gl.contains(l)).collect();
        let extra: Vec<&String> = gl.iter().filter(|l| !wl.contains(l)).collect();
        let mut put = |sign: char, l: &str| text.push_str(&format!("    {sign}{l}\n"));
        if missing.is_empty() && extra.is_empty() {
            put(' ', "same lines, different order");
            wl.iter().for_each(|l| put('-', l));
            gl.iter().for_each(|l| put('+', l));
        }
        missing.iter().for_each(|l| put('-', l));
        extra.iter().for_each(|l| put('+', l));
    }
    text
}

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Runs one file; `Err` holds a readable report.
fn run_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read: {e}"))?;
    let sc: Scenario = serde_json::from_str(&text).map_err(|e| format!("parse: {e}"))?;
    if sc.description.trim().is_empty() {
        return Err("empty description".into());
    }
    let mut want = sc.expected;
    want.pending.sort_by_key(|p| p.job);

    let out = run_cycle(&sc.snapshot, &mut build_pipeline(&sc.pipeline), None);
    let mut report = String::new();
    if !out.faults.is_empty() {
        let _ = writeln!(report, "  unexpected faults: {:?}", out.faults);
    }
    let problems = common::check_outcome(&sc.snapshot, &out);
    if !problems.is_empty() {
        let _ = writeln!(report, "  invariants broken: {problems:#?}");
    }
    let again = run_cycle(&sc.snapshot, &mut build_pipeline(&sc.pipeline), None);
    let (a, b) = (
        serde_json::to_string(&out).map_err(|e| e.to_string())?,
        serde_json::to_string(&again).map_err(|e| e.to_string())?,
    );
    if a != b {
        let _ = writeln!(report, "  not deterministic: two runs differ");
    }
    let got = actual_expected(&out, &want);
    if got != want {
        report.push_str(&diff(&want, &got));
        let json = serde_json::to_string(&got).map_err(|e| e.to_string())?;
        let _ = writeln!(report, "  actual, as \"expected\": {json}");
    }
    if report.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n{report}", sc.description))
    }
}

#[test]
fn golden_scenarios() {
    let files = scenario_files();
    assert!(
        files.len() >= 8,
        "expected at least 8 golden scenarios, found {}",
        files.len()
    );
    let mut failures = String::new();
    for f in &files {
        if let Err(report) = run_file(f) {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let _ = writeln!(failures, "\n=== {name}: {report}");
        }
    }
    assert!(failures.is_empty(), "golden scenarios failed:{failures}");
}

/// A scenario file is a plain serde `Snapshot`: it survives a round trip unchanged,
/// so the simulator or a replay tool can read the same files.
#[test]
fn golden_snapshots_round_trip() {
    for f in scenario_files() {
        let text = std::fs::read_to_string(&f).expect("read scenario");
        let value: serde_json::Value = serde_json::from_str(&text).expect("scenario is JSON");
        let snap: Snapshot =
            serde_json::from_value(value["snapshot"].clone()).expect("snapshot parses");
        let back = serde_json::to_value(&snap).expect("snapshot serializes");
        assert_eq!(
            back,
            value["snapshot"],
            "{} does not round-trip",
            f.display()
        );
    }
}
