//! The files `gantry plugin new` writes: one priority plugin, "jobs asking for fewer GPUs
//! run first", in Rust, Python or JavaScript, and one scenario that checks it
//! (`scenarios/1-smallest-first.json`, run by `gantry plugin test`).
//!
//! Owns: those texts. Does not own writing or building them (`mod.rs`).

use std::path::Path;

/// `(relative path, contents)` of a new Rust project named `name`, its SDK at `sdk`.
pub fn rust(name: &str, sdk: &Path) -> Vec<(String, String)> {
    let cargo = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
gantry-sdk = {{ path = "{sdk}" }}
serde_json = "1"

# A project of its own, even inside another workspace.
[workspace]
"#,
        sdk = sdk.display()
    );
    let lib = format!(
        r##"//! `{name}`: a Gantry priority plugin made by `gantry plugin new`. Jobs asking for
//! fewer GPUs run first; ties keep the host's order (tier, submit time, id).
//!
//! `cargo test` runs the unit test below natively; `gantry plugin build` makes the
//! component and runs `gantry plugin test` on it with `scenarios/`.

use gantry_sdk::{{Cycle, Job, Metadata, Plugin, Priority, Scored, Stage}};

/// The policy.
#[derive(Debug, Default)]
pub struct Policy;

impl Plugin for Policy {{
    fn metadata(&self) -> Metadata {{
        gantry_sdk::metadata("{name}", env!("CARGO_PKG_VERSION"), &[Stage::Priority], "no config")
    }}

    fn configure(&mut self, config_json: &str) -> Result<(), String> {{
        // Rejects any key: this plugin has no options.
        let _: serde_json::Map<String, serde_json::Value> = gantry_sdk::parse_config(config_json)?;
        Ok(())
    }}
}}

impl Priority for Policy {{
    fn score(&mut self, _ctx: &Cycle, jobs: &[Job], _previous: &[f64]) -> Result<Vec<Scored>, String> {{
        // Higher runs first: fewer GPUs, higher score.
        Ok(jobs
            .iter()
            .map(|j| Scored {{
                score: -(j.gpu_milli_total() as f64),
                tier: None,
                note: None,
            }})
            .collect())
    }}
}}

gantry_sdk::export_plugin!(Policy, stages: [priority]);

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn fewer_gpus_score_higher() {{
        let jobs: Vec<Job> = serde_json::from_str(
            r#"[{{"id": 1, "name": 0, "user": 0, "account": 0, "queue": 0, "tier": 0,
                 "submit_ms": 0, "time_limit_s": 0, "kind": "batch", "preemptible": false,
                 "labels": [], "tasks": [{{"count": 1, "gpus": 4, "gpu_milli": 0,
                 "cpu_milli": 1000, "memory_mib": 1024, "gpu_model_mask": 0}}]}},
                {{"id": 2, "name": 0, "user": 0, "account": 0, "queue": 0, "tier": 0,
                 "submit_ms": 0, "time_limit_s": 0, "kind": "batch", "preemptible": false,
                 "labels": [], "tasks": [{{"count": 1, "gpus": 1, "gpu_milli": 0,
                 "cpu_milli": 1000, "memory_mib": 1024, "gpu_model_mask": 0}}]}}]"#,
        )
        .expect("jobs");
        let ctx: Cycle = serde_json::from_str(
            r#"{{"id": 1, "now_ms": 0, "seed": 1, "strings": [""], "gpu_models": [1]}}"#,
        )
        .expect("cycle");
        let scores = Policy.score(&ctx, &jobs, &[0.0, 0.0]).expect("scores");
        assert!(scores[1].score > scores[0].score);
    }}
}}
"##
    );
    vec![
        ("Cargo.toml".into(), cargo),
        ("src/lib.rs".into(), lib),
        (".gitignore".into(), "/target\n*.wasm\n".into()),
    ]
}

/// `(relative path, contents)` of a new Python project named `name`.
pub fn python(name: &str) -> Vec<(String, String)> {
    let app = format!(
        r#""""`{name}`: a Gantry priority plugin made by `gantry plugin new`. Jobs asking for
fewer GPUs run first; ties keep the host's order (tier, submit time, id).

`gantry plugin build` makes the component (componentize-py) and runs `gantry plugin test`
on it with `scenarios/`.
"""

from wit_world import exports

import gantry
import gantry_incremental as incremental  # contract 0.2: the SDK keeps the view
from gantry import Err  # raise Err("...") to fail a call with a message


class Plugin(exports.Plugin):
    def metadata(self):
        return gantry.metadata("{name}", "0.1.0", ["priority"], "no config", contract="0.2.0")

    def configure(self, config):
        gantry.parse_config(config, {{}})  # rejects any key: this plugin has no options


class Priority(exports.Priority):
    @incremental.score  # the whole job list arrives, as in contract 0.1
    def score(self, ctx, jobs, previous):
        # Higher runs first: fewer GPUs, higher score.
        return [gantry.scored(-gantry.gpu_milli(jobs, job)) for job in jobs.jobs]
"#
    );
    vec![
        ("app.py".into(), app),
        (".gitignore".into(), "*.wasm\n__pycache__/\n".into()),
    ]
}

/// `(relative path, contents)` of a new JavaScript project named `name`.
pub fn javascript(name: &str) -> Vec<(String, String)> {
    let policy = format!(
        r#"// `{name}`: a Gantry priority plugin made by `gantry plugin new`. Jobs asking for
// fewer GPUs run first; ties keep the host's order (tier, submit time, id).
//
// `gantry plugin build` makes the component (componentize-qjs, with the SDK's gantry.js
// and gantry_incremental.js beside this file) and runs `gantry plugin test` on it with
// `scenarios/`.

import {{ metadata, parseConfig, gpuMilli, scored }} from "./gantry.js";
import * as incremental from "./gantry_incremental.js"; // contract 0.2: the SDK keeps the view

export const plugin = {{
  metadata: () => metadata("{name}", "0.1.0", ["priority"], "no config", "0.2.0"),
  configure(json) {{
    parseConfig(json, {{}}); // throws (rejecting the pipeline) on any key: no options
  }},
}};

export const priority = {{
  // One entry per job, in order. Higher runs first: fewer GPUs, higher score. The whole
  // job list arrives, as in contract 0.1.
  score: incremental.score((ctx, jobs, previous) => jobs.jobs.map((job) => scored(-gpuMilli(jobs, job)))),
}};
"#
    );
    vec![
        ("policy.js".into(), policy),
        (".gitignore".into(), "*.wasm\n".into()),
    ]
}

/// The scenario every new project starts with: a 4-GPU job submitted first, a 1-GPU job
/// second; the 1-GPU job must come first.
pub fn scenario() -> (String, String) {
    let job = |id: u64, gpus: u32, submit_ms: u64| {
        serde_json::json!({
            "id": id, "name": 1, "user": 2, "account": 3, "queue": 4, "tier": 0,
            "submit_ms": submit_ms, "time_limit_s": 3600, "kind": "batch",
            "preemptible": false, "labels": [],
            "tasks": [{"count": 1, "gpus": gpus, "gpu_milli": 0, "cpu_milli": 1000,
                       "memory_mib": 1024, "gpu_model_mask": 0}]
        })
    };
    let file = serde_json::json!({
        "name": "smallest GPU request first",
        "description": "job 1 asks for 4 GPUs and came first; job 2 asks for 1: job 2 goes first",
        "snapshot": {
            "ctx": {"id": 1, "now_ms": 1_800_000_000_000u64, "seed": 1,
                    "strings": ["", "train", "alice", "ml", "default"], "gpu_models": [1]},
            "pending": [job(1, 4, 1_799_999_000_000), job(2, 1, 1_799_999_500_000)],
            "nodes": [],
            "running": []
        },
        "expect": {"order": [2, 1]}
    });
    (
        "scenarios/1-smallest-first.json".into(),
        serde_json::to_string_pretty(&file).unwrap_or_default() + "\n",
    )
}
