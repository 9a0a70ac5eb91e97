//! `gantry accounting` (like `sacct`): one `GET /v1/accounting` call, printed as a table of
//! per-task records (one row per ended task process) and totals per user and per account,
//! or as the API's JSON with `--json`.
//!
//! `--since`/`--until` take a duration back from now (`90s`, `15m`, `4h`, `2d`), or pass an
//! absolute time to the daemon as it is (ms since the Unix epoch or RFC 3339).
//!
//! Owns: arguments → query and the text layout. Holds no state.

use crate::cli::Client;
use anyhow::Context;
use gantry_api::accounting::{AccountingRecord, AccountingReport};
use gantry_api::task::TaskExit;

/// Options of `gantry accounting`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AccountingArgs {
    /// Only this user's records (a user token sees only its own anyway).
    #[arg(long)]
    pub user: Option<String>,
    /// Only this account's records.
    #[arg(long)]
    pub account: Option<String>,
    /// Ended since: a duration back from now (1d, 4h, 90s) or an RFC 3339 / epoch-ms time.
    #[arg(long)]
    pub since: Option<String>,
    /// Ended before: a duration back from now or an RFC 3339 / epoch-ms time.
    #[arg(long)]
    pub until: Option<String>,
    /// Only this job's records.
    #[arg(long)]
    pub job: Option<u64>,
    /// Most records listed (totals always cover every matching record).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print the API's JSON answer instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// A `--since`/`--until` value as the API takes it: durations become now minus them.
fn time_arg(text: &str, now_ms: u64) -> anyhow::Result<String> {
    let t = text.trim();
    let is_duration = t.len() > 1
        && t.ends_with(['s', 'm', 'h', 'd'])
        && t[..t.len() - 1].bytes().all(|b| b.is_ascii_digit());
    if is_duration {
        let s = crate::cli::parse_duration_s(t)?;
        return Ok(now_ms.saturating_sub(s.saturating_mul(1000)).to_string());
    }
    Ok(t.to_string())
}

/// The query of `a` (what follows `/v1/accounting?`).
pub fn query(a: &AccountingArgs, now_ms: u64) -> anyhow::Result<String> {
    let mut q = Vec::new();
    for (key, value) in [("user", &a.user), ("account", &a.account)] {
        if let Some(v) = value {
            q.push(format!("{key}={}", crate::cli::percent_encode(v)));
        }
    }
    for (key, value) in [("since", &a.since), ("until", &a.until)] {
        if let Some(v) = value {
            let t = time_arg(v, now_ms).with_context(|| format!("--{key}"))?;
            q.push(format!("{key}={}", crate::cli::percent_encode(&t)));
        }
    }
    if let Some(j) = a.job {
        q.push(format!("job={j}"));
    }
    if let Some(l) = a.limit {
        q.push(format!("limit={l}"));
    }
    Ok(q.join("&"))
}

/// Runs `gantry accounting`.
pub fn run(client: &Client, a: &AccountingArgs) -> anyhow::Result<()> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let query = query(a, now_ms)?;
    if a.json {
        crate::cli::print_json(&client.accounting_json(&query)?);
    } else {
        print!("{}", render(&client.accounting(&query)?));
    }
    Ok(())
}

/// `YYYY-MM-DDTHH:MM:SSZ` of ms since the Unix epoch (whole seconds).
pub fn format_utc(ms: u64) -> String {
    i64::try_from(ms / 1000)
        .ok()
        .and_then(|secs| jiff::Timestamp::from_second(secs).ok())
        .map_or_else(|| format!("{ms} ms"), |at| at.to_string())
}

/// Wall time: `12.3s` under a minute, else `H:MM:SS`.
fn elapsed(ms: u64) -> String {
    if ms < 60_000 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    let s = ms / 1000;
    format!("{}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
}

/// `0`, `sig 9`, `lost` or `image` (its image could not be made ready), with ` oom` when
/// the OOM killer struck and ` uncharged` when a GPU failure under the run keeps it out of
/// fair share.
fn exit_text(r: &AccountingRecord) -> String {
    let mut text = match r.exit {
        TaskExit::Exited(c) => c.to_string(),
        TaskExit::Signaled(s) => format!("sig {s}"),
        TaskExit::Lost => "lost".into(),
        TaskExit::ImageFailed => "image".into(),
    };
    if r.oom_killed {
        text += " oom";
    }
    if r.uncharged.is_some() {
        text += " uncharged";
    }
    text
}

/// The share of sampled GPU time the jobs used (`37%`), or `-` when none was sampled.
fn used_share(t: &gantry_api::accounting::Totals) -> String {
    if t.gpu_hours_sampled > 0.0 {
        format!("{:.0}%", 100.0 * t.gpu_used_hours / t.gpu_hours_sampled)
    } else {
        "-".into()
    }
}

/// The tables of an accounting report.
pub fn render(report: &AccountingReport) -> String {
    let mut out = format!(
        "{:>6} {:>4} {:>3} {:<10} {:<10} {:<8} {:<16} {:<20} {:>9} {:<14} {:>10} {:>10} {:>9} {:>7} {}\n",
        "JOB",
        "TASK",
        "RUN",
        "USER",
        "ACCOUNT",
        "QUEUE",
        "NAME",
        "END (UTC)",
        "ELAPSED",
        "GPUS(i:milli)",
        "GPU-SEC",
        "GPU-USED",
        "CPU-SEC",
        "MAXRSS",
        "EXIT"
    );
    for r in &report.records {
        let gpus: Vec<String> = r
            .gpus
            .iter()
            .map(|g| format!("{}:{}", g.index, g.milli))
            .collect();
        let name: String = r.job_name.chars().take(16).collect();
        out += &format!(
            "{:>6} {:>4} {:>3} {:<10} {:<10} {:<8} {:<16} {:<20} {:>9} {:<14} {:>10.1} {:>10} {:>9.1} {:>6}M {}\n",
            r.job_id,
            r.task_index,
            r.run,
            r.user,
            r.account,
            r.queue,
            name,
            format_utc(r.end_ms),
            elapsed(r.end_ms.saturating_sub(r.start_ms)),
            if gpus.is_empty() {
                "-".into()
            } else {
                gpus.join(",")
            },
            r.gpu_milli_seconds as f64 / 1000.0,
            r.gpu_used_milli_seconds
                .map_or_else(|| "-".into(), |m| format!("{:.1}", m as f64 / 1000.0)),
            r.cpu_seconds,
            r.memory_peak_mib,
            exit_text(r),
        );
    }
    if report.truncated {
        out += "(older records left out; raise --limit; the totals below cover all)\n";
    }
    for (title, rows) in [("USER", &report.users), ("ACCOUNT", &report.accounts)] {
        out += &format!(
            "\n{title:<12} {:>6} {:>6} {:>12} {:>12} {:>9} {:>10}\n",
            "JOBS", "TASKS", "GPU-HOURS", "GPU-SECONDS", "GPU-USED", "CPU-HOURS"
        );
        for t in rows.iter().chain(std::iter::once(&report.total)) {
            out += &format!(
                "{:<12} {:>6} {:>6} {:>12.4} {:>12.1} {:>9} {:>10.4}\n",
                if t.name.is_empty() {
                    "(all)"
                } else {
                    t.name.as_str()
                },
                t.jobs,
                t.records,
                t.gpu_hours,
                t.gpu_seconds,
                used_share(t),
                t.cpu_hours,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_become_times_before_now_and_other_times_pass_through() {
        let now = 1_700_000_000_000;
        let a = AccountingArgs {
            user: Some("al ice".into()),
            since: Some("1d".into()),
            until: Some("2023-11-14T22:13:20+01:00".into()),
            job: Some(7),
            ..Default::default()
        };
        assert_eq!(
            query(&a, now).unwrap(),
            "user=al%20ice&since=1699913600000&until=2023-11-14T22%3A13%3A20%2B01%3A00&job=7"
        );
        let bad = AccountingArgs {
            since: Some("5w".into()),
            ..Default::default()
        };
        // Not a duration with a known unit: sent as is, for the daemon to refuse by name.
        assert_eq!(query(&bad, now).unwrap(), "since=5w");
    }

    #[test]
    fn times_format_as_utc() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000_999), "2023-11-14T22:13:20Z");
        assert_eq!(format_utc(951_825_600_000), "2000-02-29T12:00:00Z");
        assert_eq!(elapsed(2_345), "2.3s");
        assert_eq!(elapsed(3_725_000), "1:02:05");
    }

    #[test]
    fn the_tables_show_each_record_and_the_totals() {
        let report = json!({
            "records": [{
                "job_id": 4, "task_index": 1, "run": 0, "job_name": "train", "user": "alice",
                "account": "ml", "queue": "default", "node": "n0", "cpu_milli": 1000, "memory_mib": 64,
                "gpus": [{"index": 0, "milli": 500}], "start_ms": 1_700_000_000_000u64,
                "end_ms": 1_700_000_002_000u64, "gpu_milli_seconds": 1000, "cpu_seconds": 0.25,
                "memory_peak_mib": 12, "exit": {"Signaled": 9}, "oom_killed": true,
            }],
            "truncated": false,
            "total": {"name": "", "gpu_seconds": 1.0, "cpu_seconds": 0.0, "gpu_hours": 1.0 / 3600.0, "cpu_hours": 0.0, "records": 1, "jobs": 1},
            "users": [{"name": "alice", "gpu_seconds": 1.0, "cpu_seconds": 0.0, "gpu_hours": 1.0 / 3600.0, "cpu_hours": 0.0, "records": 1, "jobs": 1}],
            "accounts": [{"name": "ml", "gpu_seconds": 1.0, "cpu_seconds": 0.0, "gpu_hours": 1.0 / 3600.0, "cpu_hours": 0.0, "records": 1, "jobs": 1}],
        });
        let text = render(&serde_json::from_value(report).unwrap());
        let row = text.lines().nth(1).unwrap();
        for cell in [
            "train",
            "alice",
            "2023-11-14T22:13:22Z",
            "2.0s",
            "0:500",
            "sig 9 oom",
            "12M",
        ] {
            assert!(row.contains(cell), "{cell} missing from {row}");
        }
        assert!(
            text.lines()
                .any(|l| l.starts_with("alice") && l.contains("0.0003") && l.contains("1.0"))
        );
        assert!(text.lines().any(|l| l.starts_with("ml ")));
        assert_eq!(text.lines().filter(|l| l.starts_with("(all)")).count(), 2);
    }
}
