//! `gantry plugin test PLUGIN.wasm`: the language-neutral conformance runner. It loads
//! any component in the real runtime, checks its metadata, contract version and WASI
//! imports against the allow-list, runs every stage it implements on the built-in
//! scenarios (for a contract 0.2 or 0.3 plugin, also after a delta and after a full resend:
//! `incremental.rs`) and on the author's scenario files, and reports invalid output, faults,
//! deadline overruns and per-call time. Exit status: 0 when every check passes.
//!
//! Owns: the checks and the report. Does not own the sandbox (plugin runtime) or the
//! cycle (engine); it uses both exactly as the daemon does.

mod incremental;
mod scenarios;

use crate::instrumented::{Instrumented, Timings};
use crate::metrics::NoMetrics;
use gantry_contract::Stage;
use gantry_engine::{CycleOutcome, Pipeline, StageSlot, run_cycle};
use gantry_plugin_runtime::{Limits, LoadedPlugin, Runtime, RuntimeOptions};
use scenarios::Scenario;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// WASI interfaces a plugin may import (all satisfied by the empty context). Anything
/// else — filesystem, sockets, HTTP — is refused.
pub const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "gantry:policy/",
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
];

/// What to test and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The component.
    pub plugin: PathBuf,
    /// A directory of the author's scenario files (`*.json`).
    pub scenarios: Option<PathBuf>,
    /// JSON config passed to `configure`.
    pub config: String,
    /// Sandbox limits per call.
    pub limits: Limits,
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Check {
    /// Passed.
    pub ok: bool,
    /// What was checked.
    pub name: String,
    /// Details (timings, the fault, the mismatch).
    pub detail: String,
}

/// The whole report.
#[derive(Debug, Default)]
pub struct Report {
    /// Checks in order.
    pub checks: Vec<Check>,
}

impl Report {
    fn add(&mut self, ok: bool, name: impl Into<String>, detail: impl Into<String>) {
        self.checks.push(Check {
            ok,
            name: name.into(),
            detail: detail.into(),
        });
    }

    /// Failed checks.
    pub fn failed(&self) -> usize {
        self.checks.iter().filter(|c| !c.ok).count()
    }

    /// Prints the report.
    pub fn print(&self) {
        for c in &self.checks {
            println!(
                "  {}  {}: {}",
                if c.ok { "PASS" } else { "FAIL" },
                c.name,
                c.detail
            );
        }
        println!("{} checks, {} failed", self.checks.len(), self.failed());
    }
}

/// Runs every check on `opts.plugin`.
pub fn run(opts: &Options) -> anyhow::Result<Report> {
    let bytes = std::fs::read(&opts.plugin)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.plugin.display()))?;
    let rt = Runtime::new(RuntimeOptions {
        cache_dir: cache_dir(),
    })?;
    let mut report = Report::default();
    let plugin = match rt.load(&bytes) {
        Ok(p) => p,
        Err(e) => {
            report.add(false, "loads as a gantry:policy component", e.to_string());
            return Ok(report);
        }
    };
    let m = plugin.metadata();
    report.add(
        true,
        "loads as a gantry:policy component",
        format!(
            "{} {} (contract {}), stages {:?}, {:.2} MiB, sha256 {}",
            m.name,
            m.version,
            m.contract,
            m.stages,
            bytes.len() as f64 / (1 << 20) as f64,
            &plugin.sha256()[..12]
        ),
    );
    check_imports(&plugin, &mut report);
    if let Err(e) = plugin.instantiate(&opts.config, opts.limits) {
        report.add(false, format!("configure({})", opts.config), e.to_string());
        return Ok(report);
    }
    report.add(true, format!("configure({})", opts.config), "accepted");
    let defaults = Defaults::load(&rt)?;
    // 0.2 and later keep a mirror; only 0.1 sends every list whole.
    let incremental = !plugin.metadata().contract.starts_with("0.1.");
    for scenario in scenarios::builtin() {
        for &stage in plugin.stages() {
            run_stage(&plugin, stage, &scenario, opts, &defaults, &mut report);
            if incremental {
                incremental::check(&plugin, stage, &scenario, opts, &defaults, &mut report);
            }
        }
    }
    if let Some(dir) = &opts.scenarios {
        for scenario in scenarios::load_dir(dir)? {
            run_expectations(&plugin, &scenario, opts, &defaults, &mut report);
        }
    }
    Ok(report)
}

/// Compiled components are cached across runs (a Python component takes ~10 s to
/// compile): `$GANTRY_CACHE_DIR`, else `$HOME/.cache/gantry/compiled`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("GANTRY_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/gantry/compiled"))
}

fn check_imports(plugin: &LoadedPlugin, report: &mut Report) {
    let forbidden: Vec<&String> = plugin
        .imports()
        .iter()
        .filter(|i| !ALLOWED_IMPORT_PREFIXES.iter().any(|p| i.starts_with(p)))
        .collect();
    let wasi = plugin
        .imports()
        .iter()
        .filter(|i| i.starts_with("wasi:"))
        .count();
    if forbidden.is_empty() {
        report.add(
            true,
            "imports",
            format!("{wasi} WASI interfaces, all allowed (io, cli, clocks, random)"),
        );
    } else {
        let list: Vec<&str> = forbidden.iter().map(|s| s.as_str()).collect();
        report.add(
            false,
            "imports",
            format!(
                "forbidden: {} (plugins get no filesystem, network or HTTP; build Python with --stub-wasi, JS with --stub-wasi)",
                list.join(", ")
            ),
        );
    }
}

/// The built-in plugins that fill the stages the plugin under test does not implement.
struct Defaults {
    fifo: LoadedPlugin,
    first_fit: LoadedPlugin,
    preempt: LoadedPlugin,
}

impl Defaults {
    fn load(rt: &Runtime) -> anyhow::Result<Self> {
        Ok(Self {
            fifo: rt.load(gantry_components::FIFO)?,
            first_fit: rt.load(gantry_components::FIRST_FIT)?,
            preempt: rt.load(gantry_components::PRIORITY_PREEMPT)?,
        })
    }
}

/// A pipeline with `plugin` (timed) at each stage in `stages`, defaults elsewhere.
fn pipeline(
    plugin: &LoadedPlugin,
    stages: &[Stage],
    opts: &Options,
    d: &Defaults,
    timings: &Timings,
) -> anyhow::Result<Pipeline> {
    let ours = || -> anyhow::Result<Instrumented> {
        let inst = plugin.instantiate(&opts.config, opts.limits)?;
        Ok(Instrumented::new(inst, Arc::new(NoMetrics)).with_timings(timings.clone()))
    };
    let default = |p: &LoadedPlugin| {
        p.instantiate(
            "{}",
            Limits {
                deadline_ms: 10_000,
                memory_mib: 1024,
            },
        )
    };
    let mut pipe = Pipeline {
        admission: Vec::new(),
        priority: vec![StageSlot::new(Box::new(default(&d.fifo)?), "{}")],
        placement: StageSlot::new(Box::new(default(&d.first_fit)?), "{}"),
        preemption: Some(StageSlot::new(Box::new(default(&d.preempt)?), "{}")),
    };
    for stage in stages {
        match stage {
            Stage::Admission => {
                pipe.admission = vec![StageSlot::new(Box::new(ours()?), opts.config.clone())]
            }
            Stage::Priority => {
                pipe.priority = vec![StageSlot::new(Box::new(ours()?), opts.config.clone())]
            }
            Stage::Placement => {
                pipe.placement = StageSlot::new(Box::new(ours()?), opts.config.clone())
            }
            Stage::Preemption => {
                pipe.preemption = Some(StageSlot::new(Box::new(ours()?), opts.config.clone()))
            }
        }
    }
    Ok(pipe)
}

fn timing_text(timings: &Timings) -> String {
    let v: Vec<Duration> = timings.lock().map(|v| v.clone()).unwrap_or_default();
    if v.is_empty() {
        return "not called (nothing to decide)".into();
    }
    let max = v.iter().max().copied().unwrap_or_default();
    let total: Duration = v.iter().sum();
    format!(
        "{} call(s), {:.3} ms max, {:.3} ms mean",
        v.len(),
        max.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3 / v.len() as f64
    )
}

fn faults_text(out: &CycleOutcome) -> String {
    let v: Vec<String> = out
        .faults
        .iter()
        .map(|f| format!("{} at {}: {}", f.plugin.name, f.stage, f.fault))
        .collect();
    v.join("; ")
}

fn run_stage(
    plugin: &LoadedPlugin,
    stage: Stage,
    s: &Scenario,
    opts: &Options,
    d: &Defaults,
    report: &mut Report,
) {
    let name = format!("{stage} on {}", s.name);
    let timings: Timings = Arc::new(Mutex::new(Vec::new()));
    let mut pipe = match pipeline(plugin, &[stage], opts, d, &timings) {
        Ok(p) => p,
        Err(e) => return report.add(false, name, e.to_string()),
    };
    let out = run_cycle(&s.snapshot, &mut pipe, None);
    let mut faults = faults_text(&out);
    if stage == Stage::Admission
        && let Some(slot) = pipe.admission.first_mut()
    {
        for job in s.snapshot.pending.iter().take(20) {
            if let Err(f) = slot.plugin.check_submit(&s.snapshot.ctx, job) {
                faults = format!("{faults} check-submit of job {}: {f}", job.id);
                break;
            }
        }
    }
    if faults.is_empty() {
        report.add(true, name, timing_text(&timings));
    } else {
        report.add(false, name, format!("{faults} ({})", timing_text(&timings)));
    }
}

fn set(v: &[u64]) -> BTreeSet<u64> {
    v.iter().copied().collect()
}

fn run_expectations(
    plugin: &LoadedPlugin,
    s: &Scenario,
    opts: &Options,
    d: &Defaults,
    report: &mut Report,
) {
    let name = format!("scenario {}", s.name);
    let timings: Timings = Arc::new(Mutex::new(Vec::new()));
    let mut pipe = match pipeline(plugin, plugin.stages(), opts, d, &timings) {
        Ok(p) => p,
        Err(e) => return report.add(false, name, e.to_string()),
    };
    let out = run_cycle(&s.snapshot, &mut pipe, None);
    let mut problems = Vec::new();
    if !out.faults.is_empty() {
        problems.push(format!("faults: {}", faults_text(&out)));
    }
    let e = &s.expect;
    if let Some(order) = &e.order
        && &out.order != order
    {
        problems.push(format!("order {:?}, expected {order:?}", out.order));
    }
    let started: Vec<u64> = out.starts.iter().map(|x| x.job).collect();
    if let Some(want) = &e.started
        && set(&started) != set(want)
    {
        problems.push(format!("started {started:?}, expected {want:?}"));
    }
    let held: Vec<u64> = out
        .pending
        .iter()
        .filter(|(_, r)| r.stage == Stage::Admission)
        .map(|(id, _)| *id)
        .collect();
    if let Some(want) = &e.held
        && set(&held) != set(want)
    {
        problems.push(format!("held {held:?}, expected {want:?}"));
    }
    let evicted: Vec<u64> = out.evictions.iter().map(|x| x.job).collect();
    if let Some(want) = &e.evicted
        && set(&evicted) != set(want)
    {
        problems.push(format!("evicted {evicted:?}, expected {want:?}"));
    }
    for (id, code) in &e.reasons {
        match out.pending.iter().find(|(j, _)| j == id) {
            Some((_, r)) if r.code == *code => {}
            Some((_, r)) => problems.push(format!(
                "job {id}: reason {} ({}), expected {}",
                r.code.as_str(),
                r.message,
                code.as_str()
            )),
            None => problems.push(format!(
                "job {id}: not pending, expected reason {}",
                code.as_str()
            )),
        }
    }
    for (id, text) in &e.notes {
        let note = out
            .pending
            .iter()
            .find(|(j, _)| j == id)
            .and_then(|(_, r)| r.priority_note.clone());
        if !note.as_deref().unwrap_or("").contains(text.as_str()) {
            problems.push(format!(
                "job {id}: priority note {note:?}, expected it to contain {text:?}"
            ));
        }
    }
    if problems.is_empty() {
        report.add(
            true,
            name,
            format!("as expected; {}", timing_text(&timings)),
        );
    } else {
        report.add(false, name, problems.join("; "));
    }
}
