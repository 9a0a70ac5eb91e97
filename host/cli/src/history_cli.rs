//! `gantry jobs` (as `squeue`: the pending and running jobs and those that ended in the
//! last five minutes by default; several states at once; every job, history included,
//! with `--all`; a table shaped like squeue's, `squeue_view.rs`, or `--json`), `gantry admin gc` (runs the retention collector in small steps,
//! printing each step's progress until nothing is left) and `gantry admin compact` (the
//! store rewritten offline, so its files shrink).
//!
//! Owns: these commands' flags and output. Does not own the routes' answers
//! (`gantry-api`) or what is collected (the daemon's `scheduler::retention`).

use crate::cli::{self, Client};
use anyhow::Result;
use gantry_api::client::percent_encode;
use gantry_api::model::JobRecord;

/// The flags of `gantry jobs`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct JobsArgs {
    /// Only these states, comma-separated: Gantry's (pending, running, succeeded, failed,
    /// cancelled, timed_out, preempted) or SLURM's (PD, R, CD, F, CA, TO, all). Default:
    /// pending and running, and what ended in the last 5 min.
    #[arg(long, short = 't')]
    pub state: Option<String>,
    /// Only this user (as squeue -u).
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Only your own jobs (as squeue --me).
    #[arg(long, conflicts_with = "user")]
    pub me: bool,
    /// Only this account.
    #[arg(long)]
    pub account: Option<String>,
    /// Only this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs submitted at or after: a duration ago (`1h`, `2d`), ms since the Unix epoch
    /// or RFC 3339.
    #[arg(long)]
    pub since: Option<String>,
    /// Only jobs submitted before (ms since the Unix epoch or RFC 3339).
    #[arg(long)]
    pub until: Option<String>,
    /// Jobs per page (default 1000, at most 10000).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Every job, history included (every state, page after page).
    #[arg(long)]
    pub all: bool,
    /// The jobs as JSON (the API's records), for scripts.
    #[arg(long)]
    pub json: bool,
    /// Pending jobs with their expected start (the forecast's median and 90th percentile)
    /// and why they wait until then, soonest first (as squeue --start).
    #[arg(long, conflicts_with_all = ["all", "state"])]
    pub start: bool,
}

/// How long an ended job stays in the default listing, as SLURM's `MinJobAge` keeps it in
/// `squeue`.
const RECENTLY_ENDED_MS: u64 = 5 * 60 * 1000;

impl JobsArgs {
    /// The list's query string for one `state` (`None`: every state), without a cursor.
    pub fn query(&self, state: Option<&str>, now_ms: u64) -> String {
        let mut q = Vec::new();
        let since = self.since.as_ref().map(|t| match cli::parse_duration_s(t) {
            Ok(ago) => now_ms.saturating_sub(ago * 1000).to_string(),
            Err(_) => t.clone(),
        });
        let state = state.map(str::to_string);
        let text = [
            ("state", &state),
            ("user", &self.user),
            ("account", &self.account),
            ("queue", &self.queue),
            ("since", &since),
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

/// Every page of the list `query` selects, or the first only unless `all_pages`; whether
/// more pages were left.
pub(crate) fn fetch(
    client: &Client,
    query: &str,
    all_pages: bool,
) -> Result<(Vec<JobRecord>, bool)> {
    let (mut jobs, mut next) = client.jobs_page(query)?;
    while all_pages && let Some(after) = next {
        let (more, n) = client.jobs_page(&format!("{query}&after={after}"))?;
        jobs.extend(more);
        next = n;
    }
    Ok((jobs, next.is_some()))
}

/// Prints the jobs `args` select (see [`JobsArgs`]), newest first.
pub fn jobs(client: &Client, args: &JobsArgs) -> Result<()> {
    let now = now_ms();
    let mine;
    let args = if args.me {
        mine = JobsArgs {
            user: Some(crate::export::current_user()),
            ..args.clone()
        };
        &mine
    } else {
        args
    };
    let mut jobs = Vec::new();
    if args.all {
        jobs = fetch(client, &args.query(None, now), true)?.0;
    } else if args.start {
        jobs = fetch(client, &args.query(Some("pending"), now), true)?.0;
    } else if let Some(states) = &args.state {
        let mut wanted: Vec<&str> = Vec::new();
        for name in states.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            wanted.extend(crate::state_names::gantry_states(name)?);
        }
        wanted.dedup();
        for state in wanted {
            jobs.extend(fetch(client, &args.query(Some(state), now), true)?.0);
        }
    } else {
        for state in ["pending", "running"] {
            jobs.extend(fetch(client, &args.query(Some(state), now), true)?.0);
        }
        // The newest page of every state holds what ended a moment ago.
        let (newest, _) = fetch(client, &args.query(None, now), false)?;
        jobs.extend(newest.into_iter().filter(|j| {
            j.state.is_terminal() && j.end_ms.is_some_and(|e| e + RECENTLY_ENDED_MS >= now)
        }));
    }
    jobs.sort_by_key(|j| std::cmp::Reverse(j.id));
    jobs.dedup_by_key(|j| j.id);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&jobs)?);
    } else if args.start {
        for line in crate::start_view::render(&jobs) {
            println!("{line}");
        }
    } else {
        for line in crate::squeue_view::render(&jobs, now) {
            println!("{line}");
        }
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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
    let r = gantry_store::compact(data_dir).map_err(|e| match e.to_string() {
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
            a.query(Some("failed"), 0),
            "state=failed&user=ann%20b&since=2026-01-01T00%3A00%3A00Z&limit=5"
        );
        assert_eq!(JobsArgs::default().query(None, 0), "");
        // A duration is that long before now.
        let ago = JobsArgs {
            since: Some("1h".into()),
            ..JobsArgs::default()
        };
        assert_eq!(ago.query(None, 7_200_000), "since=3600000");
    }
}
