//! Golden virtual-time scenario for the `multifactor` priority plugin with `first-fit`
//! placement, run once natively and once as wasm components: both runs must give the
//! same timeline and the same scores and notes at every cycle, and both must match the
//! times and factors worked out by hand below.
//!
//! The cluster is one node of 4 GPUs. Accounts `vision` (user ann) and `nlp` (user bob)
//! have equal shares. Every job takes all 4 GPUs, so jobs run one at a time.
//!
//! Round 1: vision's history job runs 0–36000 s (144000 GPU-s). At 30000 s both
//! accounts submit a 1-hour job (vision's first, so FIFO would pick it). At 36000 s
//! vision has all the usage: classic F = 2^(−1/0.5) = 0.25, nlp F = 1, so nlp's job
//! starts first (36000–39600) and vision's follows (39600–43200).
//!
//! Round 2, about two weeks later: nlp runs 100000 GPU-s from 1175000 to 1200000 s;
//! both submit again at 1190000 s. Undecayed, vision (158400 GPU-s) would still have
//! used more than nlp (114400); decayed with the host's 7-day half-life, at 1200000 s
//! vision has 41756.0 and nlp 103808.8 GPU-s, so vision's F = 2^(−2·0.28686) = 0.67189
//! beats nlp's 0.37209 and vision's job starts first (1200000–1203600), nlp's at
//! 1203600–1207200.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{Cycle, Job, JobKind, Priority, Scored};
use gantry_engine::sim::{
    JobEnd, SimJob, SimNode, SimTask, TimelineOptions, TimelineResult, run_timeline,
};
use gantry_engine::{
    Identified, Native, Pipeline, PlacementStage, PluginIdent, PolicyFault, PriorityStage,
    StageSlot,
};
use gantry_plugin_first_fit::FirstFit;
use gantry_plugin_multifactor::Multifactor;
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

const CLASSIC: &str = r#"{"accounts": {"vision": {"shares": 1}, "nlp": {"shares": 1}}}"#;
const FAIR_TREE: &str =
    r#"{"fair_tree": true, "accounts": {"vision": {"shares": 1}, "nlp": {"shares": 1}}}"#;
const HALF_LIFE_S: f64 = 604_800.0;

/// (virtual time s, [(job name, score, note)]) of one priority call.
type Call = (u64, Vec<(String, f64, String)>);

/// Wraps a priority stage and records what it returns.
struct Recording {
    inner: Box<dyn PriorityStage>,
    log: Arc<Mutex<Vec<Call>>>,
}

impl Identified for Recording {
    fn ident(&self) -> &PluginIdent {
        self.inner.ident()
    }
}

impl Priority<PolicyFault> for Recording {
    fn score(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        let out = self.inner.score(ctx, jobs, previous)?;
        let row = jobs
            .iter()
            .zip(&out)
            .map(|(j, s)| {
                let note = s.note.clone().unwrap_or_default();
                (ctx.text(j.name).to_string(), s.score, note)
            })
            .collect();
        self.log.lock().unwrap().push((ctx.now_ms / 1000, row));
        Ok(out)
    }
}

fn node() -> SimNode {
    SimNode {
        name: "n1".into(),
        cpu_milli: 64_000,
        memory_mib: 256 * 1024,
        gpus: 4,
        gpu_model: "A100".into(),
        gpu_memory_mib: 81_920,
        labels: BTreeMap::new(),
    }
}

fn job(name: &str, account: &str, submit_s: u64, duration_s: u64) -> SimJob {
    let user = if account == "vision" { "ann" } else { "bob" };
    SimJob {
        name: name.into(),
        user: user.into(),
        account: account.into(),
        queue: "default".into(),
        tier: 0,
        kind: JobKind::Batch,
        preemptible: false,
        requeue: true,
        labels: BTreeMap::new(),
        submit_ms: submit_s * 1000,
        duration_ms: duration_s * 1000,
        time_limit_s: 0,
        tasks: vec![SimTask {
            count: 1,
            gpus: 4,
            gpu_milli: 0,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_models: vec![],
        }],
    }
}

fn workload() -> Vec<SimJob> {
    vec![
        job("vision-history", "vision", 0, 36_000),
        job("vision-1", "vision", 30_000, 3600),
        job("nlp-1", "nlp", 30_000, 3600),
        job("nlp-history", "nlp", 1_175_000, 25_000),
        job("vision-2", "vision", 1_190_000, 3600),
        job("nlp-2", "nlp", 1_190_000, 3600),
    ]
}

fn simulate(
    priority: Box<dyn PriorityStage>,
    placement: Box<dyn PlacementStage>,
    config: &str,
) -> (TimelineResult, Vec<Call>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let recording = Recording {
        inner: priority,
        log: Arc::clone(&log),
    };
    let mut pipeline = Pipeline {
        admission: vec![],
        priority: vec![StageSlot::new(Box::new(recording), config)],
        placement: StageSlot::new(placement, "{}"),
        preemption: None,
    };
    let r = run_timeline(
        &[node()],
        &workload(),
        &[],
        &TimelineOptions::default(),
        &mut pipeline,
        None,
        &mut |_| {},
    );
    let calls = log.lock().unwrap().clone();
    (r, calls)
}

fn native(config: &str) -> (TimelineResult, Vec<Call>) {
    simulate(
        Box::new(Native::new(Multifactor::default(), config).unwrap()),
        Box::new(Native::new(FirstFit::default(), "{}").unwrap()),
        config,
    )
}

fn wasm(config: &str) -> (TimelineResult, Vec<Call>) {
    let rt = Runtime::new(RuntimeOptions { cache_dir: None }).unwrap();
    let priority = rt
        .load(comp::MULTIFACTOR)
        .unwrap()
        .instantiate(config, Limits::default())
        .unwrap();
    let placement = rt
        .load(comp::FIRST_FIT)
        .unwrap()
        .instantiate("{}", Limits::default())
        .unwrap();
    simulate(Box::new(priority), Box::new(placement), config)
}

/// (name, start s, end s) of every job.
fn runs(r: &TimelineResult) -> Vec<(&str, u64, u64)> {
    r.jobs
        .iter()
        .map(|j| {
            (
                j.name.as_str(),
                j.start_ms.unwrap() / 1000,
                j.end_ms.unwrap() / 1000,
            )
        })
        .collect()
}

const EXPECTED: [(&str, u64, u64); 6] = [
    ("vision-history", 0, 36_000),
    ("vision-1", 39_600, 43_200),
    ("nlp-1", 36_000, 39_600),
    ("nlp-history", 1_175_000, 1_200_000),
    ("vision-2", 1_200_000, 1_203_600),
    ("nlp-2", 1_203_600, 1_207_200),
];

/// The scores of the call at virtual time `at_s` that saw both jobs of a round.
fn scores_at(calls: &[Call], at_s: u64, a: &str, b: &str) -> (f64, f64, String, String) {
    let (_, row) = calls
        .iter()
        .find(|(t, row)| *t == at_s && row.len() == 2)
        .unwrap_or_else(|| panic!("no call with two jobs at {at_s} s: {calls:?}"));
    let get = |name: &str| row.iter().find(|r| r.0 == name).unwrap().clone();
    let (x, y) = (get(a), get(b));
    (x.1, y.1, x.2, y.2)
}

fn assert_same(native: &(TimelineResult, Vec<Call>), wasm: &(TimelineResult, Vec<Call>)) {
    assert_eq!(
        serde_json::to_value(&native.0).unwrap(),
        serde_json::to_value(&wasm.0).unwrap(),
        "native and wasm timelines differ"
    );
    assert_eq!(native.1, wasm.1, "native and wasm scores or notes differ");
    assert!(native.0.faults.is_empty(), "{:?}", native.0.faults);
}

#[test]
fn classic_fair_share_recovers_after_usage_decays_native_and_wasm_agree() {
    let n = native(CLASSIC);
    let w = wasm(CLASSIC);
    assert_same(&n, &w);
    let r = &n.0;
    assert_eq!(runs(r), EXPECTED.to_vec());
    assert!(r.jobs.iter().all(|j| j.end == JobEnd::Completed));

    // Round 1 at 36000 s: age 6000/604800 of 1000, size 1 × 1000 each.
    let age1 = 1000.0 * 6000.0 / HALF_LIFE_S;
    let (v, b, v_note, b_note) = scores_at(&n.1, 36_000, "vision-1", "nlp-1");
    assert!((v - (0.25 * 10_000.0 + age1 + 1000.0)).abs() < 1e-9, "{v}");
    assert!((b - (10_000.0 + age1 + 1000.0)).abs() < 1e-9, "{b}");
    assert!(
        v_note.starts_with(
            "priority 3509.9 = fair-share 0.25×10000 [account vision used 40.0 GPU-h = 100% of usage, share 50%]"
        ),
        "{v_note}"
    );
    assert!(b_note.contains("fair-share 1.00×10000 [account nlp used 0.0 GPU-h"));

    // Round 2 at 1200000 s: decayed usage as the host computes it.
    let decay = |gpu_s: f64, since_s: f64| gpu_s * (-(1_200_000.0 - since_s) / HALF_LIFE_S).exp2();
    let vision = decay(
        144_000.0 * (-7200.0 / HALF_LIFE_S).exp2() + 14_400.0,
        43_200.0,
    );
    let nlp = decay(14_400.0, 39_600.0) + 100_000.0;
    let total = vision + nlp;
    let (fv, fb) = (
        (-(vision / total) / 0.5).exp2(),
        (-(nlp / total) / 0.5).exp2(),
    );
    assert!((fv - 0.671_886_736).abs() < 1e-8 && (fb - 0.372_086_524).abs() < 1e-8);
    let age2 = 1000.0 * 10_000.0 / HALF_LIFE_S;
    let (v, b, v_note, b_note) = scores_at(&n.1, 1_200_000, "vision-2", "nlp-2");
    assert!((v - (fv * 10_000.0 + age2 + 1000.0)).abs() < 1e-6, "{v}");
    assert!((b - (fb * 10_000.0 + age2 + 1000.0)).abs() < 1e-6, "{b}");
    assert!(
        v_note.contains("fair-share 0.67×10000 [account vision used 11.6 GPU-h = 29% of usage"),
        "{v_note}"
    );
    assert!(
        b_note.contains("fair-share 0.37×10000 [account nlp used 28.8 GPU-h = 71% of usage"),
        "{b_note}"
    );
}

#[test]
fn fair_tree_gives_the_same_order_native_and_wasm_agree() {
    let n = native(FAIR_TREE);
    let w = wasm(FAIR_TREE);
    assert_same(&n, &w);
    assert_eq!(runs(&n.0), EXPECTED.to_vec());
    // Two leaves: the account with the higher level fair-share ranks 2 of 2 (F 1), the
    // other 1 of 2 (F 0.5).
    let (_, _, v_note, b_note) = scores_at(&n.1, 36_000, "vision-1", "nlp-1");
    assert!(
        v_note.contains("fair-share 0.50×10000 [fair tree rank 1 of 2"),
        "{v_note}"
    );
    assert!(
        b_note.contains("fair-share 1.00×10000 [fair tree rank 2 of 2"),
        "{b_note}"
    );
    let (_, _, v_note, b_note) = scores_at(&n.1, 1_200_000, "vision-2", "nlp-2");
    assert!(
        v_note.contains("fair-share 1.00×10000 [fair tree rank 2 of 2"),
        "{v_note}"
    );
    assert!(
        b_note.contains("fair-share 0.50×10000 [fair tree rank 1 of 2"),
        "{b_note}"
    );
}

#[test]
fn without_fair_share_fifo_order_would_have_won_round_one() {
    // Control: with the fair-share weight at 0 the tie falls to the host's order
    // (submit time, then id), so vision-1 (listed first) starts first. This is what
    // the fair-share factor changes in the scenario above.
    let config = r#"{"weights": {"fairshare": 0}}"#;
    let n = native(config);
    let starts: Vec<(&str, u64)> = runs(&n.0).iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(starts[1], ("vision-1", 36_000));
    assert_eq!(starts[2], ("nlp-1", 39_600));
}

#[test]
fn wasm_config_errors_name_the_key() {
    let rt = Runtime::new(RuntimeOptions { cache_dir: None }).unwrap();
    let loaded = rt.load(comp::MULTIFACTOR).unwrap();
    let e = loaded
        .instantiate(
            r#"{"accounts": {"vision": {"shares": -1}}}"#,
            Limits::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("accounts.vision.shares"), "{e}");
    let e = loaded
        .instantiate(r#"{"half_life_s": 3600}"#, Limits::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("half_life_s"), "{e}");
}
