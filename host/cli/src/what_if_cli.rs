//! What-ifs at the command line: `gantry submit --test-only …` and `sbatch --test-only`
//! (when a job that is not submitted would start) and `gantry job ID --what-if --gpus 2
//! --time 2h --queue low` (one line per variant of a pending job, each against the job as
//! it is: "with 2 GPUs: ~14:20, 3 h sooner").
//!
//! Owns: building the variants and the lines. Does not own the forecast (the daemon's
//! `POST /v1/jobs/forecast`) or the flags' spellings (`submit_cli`).

use crate::cli::Client;
use crate::start_view::describe;
use anyhow::{Context, Result};
use gantry_api::model::StartForecast;
use serde_json::{Value, json};

/// The variants `gantry job ID --what-if` asks about.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WhatIfArgs {
    /// Instead of showing the job, forecast it as it is and with each change given below.
    #[arg(long)]
    pub what_if: bool,
    /// ... with this many GPUs per task.
    #[arg(long, requires = "what_if")]
    pub gpus: Option<u32>,
    /// ... with this time limit (`2h`, `90m`, `1-00:00:00`).
    #[arg(long, requires = "what_if")]
    pub time: Option<String>,
    /// ... in this queue.
    #[arg(long, requires = "what_if")]
    pub queue: Option<String>,
}

/// How much sooner (or later) `b` starts than `a`, in words.
fn compared(a: &StartForecast, b: &StartForecast) -> String {
    match (a.p50_ms, b.p50_ms) {
        (Some(a), Some(b)) if b < a => format!(", {} sooner", duration(a - b)),
        (Some(a), Some(b)) if b > a => format!(", {} later", duration(b - a)),
        (Some(_), Some(_)) => ", the same".into(),
        _ => String::new(),
    }
}

fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..120 => format!("{s} s"),
        120..7200 => format!("{} min", s / 60),
        _ => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// `gantry job ID --what-if ...`: the job as it is, then each variant, one line each.
pub fn job_variants(client: &Client, id: u64, a: &WhatIfArgs) -> Result<()> {
    let job = client.job(id)?;
    let spec = serde_json::to_value(&job.spec).context("the job's spec")?;
    let as_is = client.what_if(&spec, Some(id))?;
    println!("as it is: {}", describe(&as_is));
    let mut variants: Vec<(String, Value)> = Vec::new();
    if let Some(g) = a.gpus {
        let mut v = spec.clone();
        if let Some(tasks) = v["tasks"].as_array_mut() {
            for t in tasks {
                t["gpus"] = json!(g);
                t["gpu_milli"] = json!(0);
            }
        }
        variants.push((format!("with {g} GPU{}", if g == 1 { "" } else { "s" }), v));
    }
    if let Some(t) = &a.time {
        let mut v = spec.clone();
        v["time_limit_s"] = json!(crate::submit_cli::parse_time_flag(t)?);
        variants.push((format!("with a time limit of {t}"), v));
    }
    if let Some(q) = &a.queue {
        let mut v = spec.clone();
        v["queue"] = json!(q);
        variants.push((format!("in queue {q}"), v));
    }
    for (what, v) in variants {
        match client.what_if(&v, Some(id)) {
            Ok(f) => println!("{what}: {}{}", describe(&f), compared(&as_is, &f)),
            Err(e) => println!("{what}: {e}"),
        }
    }
    Ok(())
}
