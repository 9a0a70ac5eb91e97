//! `gantry hold`, `release`, `update` and `signal`: what SLURM users do with `scontrol
//! hold/release/update` and `scancel --signal`.
//!
//! Owns: these commands' arguments and output. Does not own the rules (the daemon's
//! `gantry_controller`'s `job_control.rs`) nor the id list syntax (`cancel_cli::named`).

use crate::submit_cli::parse_time_flag;
use anyhow::{Context, bail};
use gantry_api::client::Client;
use gantry_api::model::JobRecord;
use gantry_api::model::job_options::parse_dependencies;
use serde_json::json;

/// `gantry hold IDS...`: holds each pending job (`scontrol hold`), printing its state.
pub fn hold_all(client: &Client, args: &[String]) -> anyhow::Result<()> {
    each_job(client, args, "held", |c, id| c.hold(id))
}

/// `gantry release IDS...`: releases each held job (`scontrol release`).
pub fn release_all(client: &Client, args: &[String]) -> anyhow::Result<()> {
    each_job(client, args, "released", |c, id| c.release(id))
}

/// `scontrol requeue IDS...`: stops each running job to run it again from the start.
pub fn requeue_all(client: &Client, args: &[String]) -> anyhow::Result<()> {
    each_job(client, args, "requeued", |c, id| c.requeue(id))
}

/// Asks `request` for every job `args` name (ids, ranges, an array's id for every member
/// that has not ended, a member as `64_3`, as `cancel` reads them); goes on past a refusal
/// and fails at the end if any was refused.
fn each_job(
    client: &Client,
    args: &[String],
    what: &str,
    request: impl Fn(&Client, u64) -> gantry_api::client::Result<JobRecord>,
) -> anyhow::Result<()> {
    let mut ids = Vec::new();
    for arg in args
        .iter()
        .flat_map(|a| a.split(','))
        .filter(|a| !a.is_empty())
    {
        ids.extend(crate::cancel_cli::named(client, arg)?);
    }
    let mut failed = 0usize;
    for id in &ids {
        match request(client, *id) {
            Ok(j) => println!("job {id}: {}{}", j.state.as_str(), held_note(&j)),
            Err(e) => {
                failed += 1;
                eprintln!("job {id}: {e}");
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} jobs could not be {what}", ids.len());
    }
    Ok(())
}

fn held_note(job: &JobRecord) -> String {
    job.held_by
        .as_ref()
        .map_or_else(String::new, |by| format!(", held by {by}"))
}

/// The body of `gantry update ID [--time T] [--dependency D]`: `--time` in any form
/// `submit` takes, `--dependency` as sbatch's (`afterok:12:13,afterany:14`; `none` clears).
pub fn update_body(
    time: Option<&str>,
    dependency: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let mut body = serde_json::Map::new();
    if let Some(t) = time {
        let limit = parse_time_flag(t).with_context(|| format!("--time {t:?}"))?;
        body.insert("time_limit_s".into(), json!(limit));
    }
    if let Some(d) = dependency {
        let deps = if d.trim().eq_ignore_ascii_case("none") || d.trim().is_empty() {
            Vec::new()
        } else {
            parse_dependencies(d).map_err(|e| anyhow::anyhow!("--dependency {d:?}: {e}"))?
        };
        body.insert("dependencies".into(), serde_json::to_value(deps)?);
    }
    if body.is_empty() {
        bail!("nothing to update: give --time and/or --dependency");
    }
    Ok(serde_json::Value::Object(body))
}

/// `gantry update ID ...` (`scontrol update JobId=ID TimeLimit=... Dependency=...`).
pub fn update(
    client: &Client,
    id: u64,
    time: Option<&str>,
    dependency: Option<&str>,
) -> anyhow::Result<()> {
    let body = update_body(time, dependency)?;
    let job = client
        .update(id, &body)
        .with_context(|| format!("updating job {id}"))?;
    let deps: Vec<String> = job
        .spec
        .dependencies
        .iter()
        .map(|d| format!("{}:{}", d.kind.as_str(), d.job))
        .collect();
    println!(
        "job {id}: {}, time limit {} s, dependencies {}",
        job.state.as_str(),
        job.spec.time_limit_s,
        if deps.is_empty() {
            "none".into()
        } else {
            deps.join(",")
        }
    );
    Ok(())
}

/// `gantry signal ID SIGNAL` (`scancel --signal=SIGNAL ID`): the name as `kill -l` gives
/// it, with or without `SIG`.
pub fn signal(client: &Client, id: u64, signal: &str) -> anyhow::Result<()> {
    let name = signal.trim().trim_start_matches("SIG").to_ascii_uppercase();
    client
        .signal(id, &name)
        .with_context(|| format!("signalling job {id}"))?;
    println!("job {id}: sent SIG{name}");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::update_body;
    use serde_json::json;

    #[test]
    fn update_takes_the_time_and_dependency_forms_submit_takes() {
        assert_eq!(
            update_body(Some("2h"), None).unwrap(),
            json!({"time_limit_s": 7200})
        );
        assert_eq!(
            update_body(Some("01:30:00"), Some("afterok:5:6")).unwrap(),
            json!({"time_limit_s": 5400, "dependencies": [
                {"kind": "afterok", "job": 5}, {"kind": "afterok", "job": 6}]})
        );
        assert_eq!(
            update_body(None, Some("none")).unwrap(),
            json!({"dependencies": []})
        );
        assert!(update_body(None, None).is_err(), "nothing to update");
        assert!(update_body(None, Some("after:x")).is_err());
    }
}
