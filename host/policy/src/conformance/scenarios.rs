//! Scenarios for the conformance runner: the built-in ones every plugin must survive
//! (empty cluster, full cluster, gangs, fractions, thousands of jobs) and an author's
//! own scenario files (a snapshot plus what they expect to happen).
//!
//! Owns: generating and parsing scenarios. Does not own running them (`mod.rs`).

use gantry_contract as c;
use gantry_engine::{Interner, Snapshot};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One scenario to run a plugin on.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name in the report.
    pub name: String,
    /// The cycle input.
    pub snapshot: Snapshot,
    /// What the author expects, if anything.
    pub expect: Expect,
}

/// What an author's scenario expects (every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The admitted jobs in priority order, exactly.
    pub order: Option<Vec<u64>>,
    /// The jobs started, in any order.
    pub started: Option<Vec<u64>>,
    /// The jobs held by admission, in any order.
    pub held: Option<Vec<u64>>,
    /// The jobs evicted, in any order.
    pub evicted: Option<Vec<u64>>,
    /// Reason code of pending jobs (e.g. `"7": "held-by-policy"`).
    #[serde(default)]
    pub reasons: BTreeMap<u64, c::ReasonCode>,
    /// Text the priority note of a pending job must contain.
    #[serde(default)]
    pub notes: BTreeMap<u64, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    snapshot: Snapshot,
    #[serde(default)]
    expect: Expect,
}

/// Reads every `*.json` scenario in `dir`, sorted by file name.
pub fn load_dir(dir: &Path) -> anyhow::Result<Vec<Scenario>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read scenarios in {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            let f: ScenarioFile =
                serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            let _ = f.description;
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(Scenario {
                name: f.name.unwrap_or(stem),
                snapshot: f.snapshot,
                expect: f.expect,
            })
        })
        .collect()
}

struct Builder {
    strings: Interner,
    models: Vec<c::Symbol>,
}

impl Builder {
    fn new() -> Self {
        let mut strings = Interner::new();
        let models = vec![strings.intern("H100"), strings.intern("A100")];
        Self { strings, models }
    }

    fn node(&mut self, id: u32, gpus: u32, busy: u32) -> c::Node {
        c::Node {
            id,
            name: self.strings.intern(&format!("node-{id}")),
            state: c::NodeState::Up,
            labels: vec![c::Label {
                key: self.strings.intern("rack"),
                value: self.strings.intern(&format!("r{}", id % 4)),
            }],
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000 - busy * 1000,
            memory_mib_total: 512_000,
            memory_mib_free: 512_000 - u64::from(busy) * 1024,
            gpus: (0..gpus)
                .map(|index| c::Gpu {
                    index,
                    model: self.models[(id % 2) as usize],
                    memory_mib: 81_920,
                    free_milli: if index < busy { 0 } else { 1000 },
                    healthy: true,
                    parent: None,
                })
                .collect(),
            revision: 0,
        }
    }

    fn job(&mut self, id: u64, groups: &[(u32, u32, u32)], kind: c::JobKind) -> c::Job {
        let user = format!("user{}", id % 7);
        c::Job {
            id,
            name: self.strings.intern(&format!("job-{}", id % 13)),
            user: self.strings.intern(&user),
            account: self.strings.intern(&format!("team{}", id % 3)),
            queue: self.strings.intern(if id.is_multiple_of(5) {
                "dev"
            } else {
                "default"
            }),
            tier: 0,
            submit_ms: 1_700_000_000_000 + id * 1000,
            time_limit_s: 600 * (1 + id % 12),
            kind,
            preemptible: id.is_multiple_of(2),
            labels: vec![c::Label {
                key: self.strings.intern("project"),
                value: self.strings.intern(&format!("p{}", id % 4)),
            }],
            tasks: groups
                .iter()
                .map(|&(count, gpus, gpu_milli)| c::TaskGroup {
                    count,
                    gpus,
                    gpu_milli,
                    cpu_milli: 1000,
                    memory_mib: 1024,
                    gpu_model_mask: 0,
                })
                .collect(),
            revision: 0,
        }
    }

    fn running(&mut self, id: u64, node: u32, busy: u32) -> c::RunningJob {
        c::RunningJob {
            job: self.job(id, &[(1, busy, 0)], c::JobKind::Batch),
            tasks: vec![c::TaskAllocation {
                node,
                gpus: (0..busy)
                    .map(|index| c::GpuShare { index, milli: 1000 })
                    .collect(),
                cpu_milli: busy * 1000,
                memory_mib: u64::from(busy) * 1024,
            }],
            start_ms: 1_699_999_000_000,
            expected_end_ms: Some(1_700_003_000_000),
            score: 0.0,
            revision: 0,
        }
    }

    fn finish(
        mut self,
        name: &str,
        pending: Vec<c::Job>,
        nodes: Vec<c::Node>,
        running: Vec<c::RunningJob>,
    ) -> Scenario {
        let users: Vec<c::Symbol> = (0..7)
            .map(|i| self.strings.intern(&format!("user{i}")))
            .collect();
        let ctx = c::Cycle {
            id: 1,
            now_ms: 1_700_000_500_000,
            seed: 42,
            gpu_models: self.models.clone(),
            user_usage: users
                .iter()
                .map(|&who| c::Usage {
                    who,
                    gpu_seconds: f64::from(who) * 3600.0,
                })
                .collect(),
            user_gpus: users
                .iter()
                .map(|&who| c::GpuUse {
                    who,
                    gpu_milli: 1000,
                })
                .collect(),
            totals: c::ClusterTotals {
                nodes: nodes.len() as u32,
                gpu_milli_total: nodes.iter().map(|n| n.gpus.len() as u64 * 1000).sum(),
                gpu_milli_free: nodes
                    .iter()
                    .flat_map(|n| &n.gpus)
                    .map(|g| u64::from(g.free_milli))
                    .sum(),
                cpu_milli_total: nodes.iter().map(|n| u64::from(n.cpu_milli_total)).sum(),
                memory_mib_total: nodes.iter().map(|n| n.memory_mib_total).sum(),
            },
            ..Default::default()
        };
        let mut snapshot = Snapshot {
            ctx,
            pending,
            nodes,
            running,
            evicting: Vec::new(),
        };
        snapshot.ctx.strings = self.strings.into_strings();
        Scenario {
            name: name.into(),
            snapshot,
            expect: Expect::default(),
        }
    }
}

/// The scenarios every plugin is run on.
pub fn builtin() -> Vec<Scenario> {
    let mut out = Vec::new();

    let mut b = Builder::new();
    let jobs = (1..=5)
        .map(|i| b.job(i, &[(1, 1, 0)], c::JobKind::Batch))
        .collect();
    out.push(b.finish("empty cluster (no nodes)", jobs, Vec::new(), Vec::new()));

    let mut b = Builder::new();
    let nodes = (0..2).map(|i| b.node(i, 8, 8)).collect();
    let running = (0..2)
        .map(|i| b.running(100 + u64::from(i), i, 8))
        .collect();
    let jobs = (1..=20)
        .map(|i| b.job(i, &[(1, 1 + (i % 4) as u32, 0)], c::JobKind::Batch))
        .collect();
    out.push(b.finish("full cluster", jobs, nodes, running));

    let mut b = Builder::new();
    let nodes = (0..4).map(|i| b.node(i, 4, 0)).collect();
    let jobs = vec![
        b.job(1, &[(2, 4, 0)], c::JobKind::Batch),
        b.job(2, &[(3, 4, 0)], c::JobKind::Batch),
        b.job(3, &[(1, 2, 0), (2, 1, 0)], c::JobKind::Batch),
        b.job(4, &[(4, 4, 0)], c::JobKind::Batch),
    ];
    out.push(b.finish("gangs", jobs, nodes, Vec::new()));

    let mut b = Builder::new();
    let nodes = vec![b.node(0, 2, 0)];
    let jobs = (1..=8)
        .map(|i| {
            b.job(
                i,
                &[(1, 0, [250, 500, 750][(i % 3) as usize])],
                c::JobKind::Interactive,
            )
        })
        .collect();
    out.push(b.finish("fractions", jobs, nodes, Vec::new()));

    let mut b = Builder::new();
    let nodes = (0..500).map(|i| b.node(i, 8, 4)).collect();
    let running = (0..500)
        .map(|i| b.running(100_000 + u64::from(i), i, 4))
        .collect();
    let jobs = (1..=5_000)
        .map(|i| b.job(i, &[(1, 1 + (i % 4) as u32, 0)], c::JobKind::Batch))
        .collect();
    out.push(b.finish(
        "thousands of jobs (5,000 pending, 500 nodes)",
        jobs,
        nodes,
        running,
    ));
    out
}
