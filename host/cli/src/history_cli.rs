//! `gantry jobs` (a page of the job list, or every page with `--all`, from memory and
//! history alike), `gantry admin gc` (runs the retention collector in small steps,
//! printing each step's progress until nothing is left) and `gantry admin compact` (the
//! store rewritten offline, so its files shrink).
//!
//! Owns: these commands' flags and output. Does not own the routes' answers
//! (`gantry-api`) or what is collected (the daemon's `scheduler::retention`).

use crate::cli::{self, Client};
use anyhow::Result;
use gantry_api::client::percent_encode;

/// The flags of `gantry jobs`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct JobsArgs {
    /// Only this state (pending, running, succeeded, failed, cancelled, timed_out, preempted).
    #[arg(long)]
    pub state: Option<String>,
    /// Only this user.
    #[arg(long)]
    pub user: Option<String>,
    /// Only this account.
    #[arg(long)]
    pub account: Option<String>,
    /// Only this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs submitted at or after (ms since the Unix epoch or RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Only jobs submitted before (ms since the Unix epoch or RFC 3339).
    #[arg(long)]
    pub until: Option<String>,
    /// Jobs per page (default 1000, at most 10000).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Every matching job, page after page (default: the first page).
    #[arg(long)]
    pub all: bool,
}

impl JobsArgs {
    /// The list's query string, without a cursor.
    pub fn query(&self) -> String {
        let mut q = Vec::new();
        let text = [
            ("state", &self.state),
            ("user", &self.user),
            ("account", &self.account),
            ("queue", &self.queue),
            ("since", &self.since),
            ("until", &self.until),
        ];
        for (k, v) in text {
            if let Some(v) = v {
                q.push(format!("{k}={}", percent_encode(v)));
            }
        }
        if let Some(l) = self.limit {
            q.push(format!("limit={l}"));
        }
        q.join("&")
    }
}

/// Prints the first page of jobs, or every page with `--all`.
pub fn jobs(client: &Client, args: &JobsArgs) -> Result<()> {
    let base = args.query();
    let (mut jobs, mut next) = client.jobs_page(&base)?;
    while args.all
        && let Some(after) = next
    {
        let (more, n) = client.jobs_page(&format!("{base}&after={after}"))?;
        jobs.extend(more);
        next = n;
    }
    cli::print_jobs(&jobs);
    if let Some(after) = next {
        eprintln!("(more: --all for every page)  [next page: after={after}]");
    }
    Ok(())
}

/// Batches of `retention.gc_batch` deletes per request of `gantry admin gc`: each answer
/// is a line of progress.
const GC_STEP_BATCHES: u64 = 20;

/// Runs the collector until it is done, printing what each step deleted.
pub fn gc(client: &Client) -> Result<()> {
    let mut total = [0u64; 4];
    let mut first_size = None;
    loop {
        let r = client.admin_gc(GC_STEP_BATCHES)?;
        let n = |k: &str| r.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let step = [
            n("jobs_deleted"),
            n("job_dirs_deleted"),
            n("events_deleted"),
            n("accounting_deleted"),
        ];
        for (t, s) in total.iter_mut().zip(step) {
            *t += s;
        }
        first_size.get_or_insert(n("store_bytes_before"));
        println!(
            "deleted so far: {} jobs, {} job directories, {} events, {} accounting records ({} jobs left in history, {} ms this step)",
            total[0],
            total[1],
            total[2],
            total[3],
            n("jobs_stored"),
            n("ms")
        );
        if r.get("done").and_then(serde_json::Value::as_bool) != Some(false) {
            let mib = |b: u64| b as f64 / (1 << 20) as f64;
            println!(
                "done; store {:.1} MiB before, {:.1} MiB now",
                mib(first_size.unwrap_or(0)),
                mib(n("store_bytes_after"))
            );
            return Ok(());
        }
    }
}

/// `gantry admin compact`: rewrites the store offline and says how much it shrank.
pub fn compact(data_dir: &std::path::Path) -> Result<()> {
    let r = gantry::store::compact(data_dir).map_err(|e| match e.to_string() {
        m if m.contains("lock") => {
            anyhow::anyhow!(
                "{m}: is the daemon running on {}? stop it first",
                data_dir.display()
            )
        }
        m => anyhow::anyhow!(m),
    })?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "compacted {}: {:.1} MiB -> {:.1} MiB ({} keys, {:.1} s)",
        data_dir.display(),
        mib(r.bytes_before),
        mib(r.bytes_after),
        r.keys,
        r.ms as f64 / 1000.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_each_flag_given_and_encodes_values() {
        let a = JobsArgs {
            state: Some("failed".into()),
            user: Some("ann b".into()),
            since: Some("2026-01-01T00:00:00Z".into()),
            limit: Some(5),
            ..JobsArgs::default()
        };
        assert_eq!(
            a.query(),
            "state=failed&user=ann%20b&since=2026-01-01T00%3A00%3A00Z&limit=5"
        );
        assert_eq!(JobsArgs::default().query(), "");
    }
}
