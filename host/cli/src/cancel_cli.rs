//! `gantry cancel` as `scancel`: ids and ranges (`8 9 12-20`), an array by its id (every
//! member) or one member (`64_3`), and the jobs of a user or in some states (`--user alice`,
//! `--state pending,running`; with ids, only those of them that match). Each job is
//! cancelled on its own; the command goes on past one that cannot be and fails at the end.
//!
//! Owns: turning these forms into job ids. Does not own the cancel itself (the daemon).

use crate::cli::{Client, job_ids, percent_encode};
use anyhow::{Context, Result, bail};
use gantry_api::model::JobRecord;
use std::collections::BTreeSet;

/// Options of `gantry cancel`.
#[derive(Debug, Clone, clap::Args)]
pub struct CancelArgs {
    /// Job ids, ranges (`12-20`), array ids (every member) and members (`64_3`).
    pub ids: Vec<String>,
    /// Only jobs of this user (alone: every pending and running job of theirs).
    #[arg(short = 'u', long)]
    pub user: Option<String>,
    /// Only jobs in these states (`pending,running`); alone: every such job you may see.
    #[arg(short = 't', long)]
    pub state: Option<String>,
}

/// States a cancel can change.
const CANCELLABLE: [&str; 2] = ["pending", "running"];

/// The members of the array whose id is `array` (ids from `array` on, while they are its).
pub(crate) fn members(client: &Client, array: u64) -> Result<Vec<JobRecord>> {
    let mut out = Vec::new();
    let mut id = array;
    while let Ok(job) = client.job(id) {
        if job.array.is_none_or(|a| a.array_id != array) {
            break;
        }
        out.push(job);
        id += 1;
    }
    Ok(out)
}

/// The ids one argument names.
pub(crate) fn named(client: &Client, arg: &str) -> Result<Vec<u64>> {
    if let Some((array, index)) = arg.split_once('_') {
        let array: u64 = array
            .trim()
            .parse()
            .with_context(|| format!("{arg:?}: not ARRAY_INDEX"))?;
        let index: u32 = index
            .trim()
            .parse()
            .with_context(|| format!("{arg:?}: not ARRAY_INDEX"))?;
        let member = members(client, array)?
            .into_iter()
            .find(|j| j.array.is_some_and(|a| a.index == index));
        return match member {
            Some(j) => Ok(vec![j.id]),
            None => bail!("{arg}: array {array} has no member {index}"),
        };
    }
    let mut ids = Vec::new();
    for id in job_ids(&[arg.to_string()])? {
        // The id of an array names every member that has not ended, as with scancel.
        match client.job(id) {
            Ok(j) if j.array.is_some_and(|a| a.array_id == id) => {
                let live = members(client, id)?;
                ids.extend(live.iter().filter(|m| !m.state.is_terminal()).map(|m| m.id));
            }
            _ => ids.push(id),
        }
    }
    Ok(ids)
}

/// Whether `job` passes `--user` and `--state`.
fn selected(job: &JobRecord, a: &CancelArgs, states: &[String]) -> bool {
    a.user.as_ref().is_none_or(|u| &job.spec.user == u)
        && states.iter().any(|s| s == job.state.as_str())
}

/// Runs `gantry cancel`.
pub fn run(client: &Client, a: &CancelArgs) -> Result<()> {
    let states: Vec<String> = match &a.state {
        Some(list) => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => CANCELLABLE.iter().map(|s| (*s).to_string()).collect(),
    };
    let mut ids = BTreeSet::new();
    if a.ids.is_empty() {
        if a.user.is_none() && a.state.is_none() {
            bail!(
                "name the jobs to cancel: ids, ranges (12-20), arrays (64, 64_3), --user or --state"
            );
        }
        for state in &states {
            let mut query = format!("state={}", percent_encode(state));
            if let Some(u) = &a.user {
                query.push_str(&format!("&user={}", percent_encode(u)));
            }
            let (jobs, _) = crate::history_cli::fetch(client, &query, true)?;
            ids.extend(jobs.iter().map(|j| j.id));
        }
    } else {
        let filtered = a.user.is_some() || a.state.is_some();
        for arg in &a.ids {
            for id in named(client, arg)? {
                if !filtered || client.job(id).is_ok_and(|j| selected(&j, a, &states)) {
                    ids.insert(id);
                }
            }
        }
    }
    let mut failed = 0usize;
    for id in &ids {
        match client.cancel(*id) {
            Ok(j) => println!("job {id}: {}", serde_json::to_string(&j.state)?),
            Err(e) => {
                failed += 1;
                eprintln!("job {id}: {e}");
            }
        }
    }
    if ids.is_empty() {
        println!("no job matched");
    }
    if failed > 0 {
        bail!("{failed} of {} jobs could not be cancelled", ids.len());
    }
    Ok(())
}
