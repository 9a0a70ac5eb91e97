//! `sacct`: jobs from Gantry's memory and history in sacct's formats: `-j` (ids, arrays,
//! members `64_3`), `-u`/`-a`, `-S`/`-E`, `-s`, `-X`, `-n`, `-P`/`--parsable2`, `-p`,
//! `-b` and `-o`/`--format` with SLURM's field names. Gantry has no job steps, so there are
//! no `.batch` or `.extern` lines: every output is what `-X` shows.
//!
//! Owns: sacct's options, fields and layout. Does not own the job list (the API) or the
//! spellings of states and times (`job_fields`).

use super::args::{self, Opt, Takes};
use super::job_fields as f;
use super::text_format::{Column, cell, named_fields};
use crate::cli::{Client, percent_encode};
use anyhow::{Result, bail};
use gantry_api::model::JobRecord;

const OPTIONS: &[Opt] = &[
    ("jobs", Some('j'), Takes::Value),
    ("user", Some('u'), Takes::Value),
    ("allusers", Some('a'), Takes::Nothing),
    ("starttime", Some('S'), Takes::Value),
    ("endtime", Some('E'), Takes::Value),
    ("state", Some('s'), Takes::Value),
    ("allocations", Some('X'), Takes::Nothing),
    ("noheader", Some('n'), Takes::Nothing),
    ("parsable2", Some('P'), Takes::Nothing),
    ("parsable", Some('p'), Takes::Nothing),
    ("brief", Some('b'), Takes::Nothing),
    ("long", Some('l'), Takes::Nothing),
    ("format", Some('o'), Takes::Value),
    ("partition", Some('r'), Takes::Value),
    ("accounts", Some('A'), Takes::Value),
    ("name", None, Takes::Value),
    ("delimiter", None, Takes::Value),
    ("duplicates", Some('D'), Takes::Nothing),
    ("truncate", Some('T'), Takes::Nothing),
    ("allclusters", Some('L'), Takes::Nothing),
    ("clusters", Some('M'), Takes::Value),
    ("units", None, Takes::Value),
    ("noconvert", None, Takes::Nothing),
    ("help", Some('h'), Takes::Nothing),
];

const DEFAULT_FORMAT: &str = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
const BRIEF_FORMAT: &str = "JobID,State,ExitCode";
const LONG_FORMAT: &str = "JobID,JobIDRaw,JobName,Partition,Account,User,AllocCPUS,NNodes,\
                           NTasks,State,ExitCode,Submit,Start,End,Elapsed,Timelimit,NodeList,\
                           ReqMem,AllocTRES";

/// The canonical name and default width of a field sacct knows, or `None`.
fn field(name: &str) -> Option<(&'static str, usize)> {
    const FIELDS: &[(&str, usize)] = &[
        ("JobID", 12),
        ("JobIDRaw", 12),
        ("JobName", 10),
        ("State", 10),
        ("ExitCode", 8),
        ("DerivedExitCode", 15),
        ("Elapsed", 10),
        ("ElapsedRaw", 10),
        ("Start", 19),
        ("End", 19),
        ("Submit", 19),
        ("Eligible", 19),
        ("NodeList", 15),
        ("AllocTRES", 30),
        ("ReqTRES", 30),
        ("ReqMem", 10),
        ("AllocCPUS", 10),
        ("ReqCPUS", 8),
        ("NCPUS", 10),
        ("NNodes", 8),
        ("AllocNodes", 10),
        ("ReqNodes", 8),
        ("NTasks", 8),
        ("Partition", 10),
        ("Account", 10),
        ("User", 9),
        ("Timelimit", 10),
        ("TimelimitRaw", 12),
        ("Reason", 20),
        ("WorkDir", 30),
        ("ArrayJobID", 12),
        ("ArrayTaskID", 12),
        ("QOS", 10),
        ("Reservation", 12),
        ("Priority", 10),
        ("Comment", 15),
        ("Restarts", 8),
    ];
    FIELDS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .copied()
}

/// The value of field `name` (canonical) for `job`.
fn value(job: &JobRecord, name: &str, now_ms: u64) -> String {
    let (tasks, cpus, _, mem) = f::requested(job);
    let ran = job.start_ms.is_some();
    match name {
        "JobID" => f::job_id(job),
        "JobIDRaw" => job.id.to_string(),
        "JobName" => job.spec.name.clone(),
        "State" => f::accounted_state(job),
        "ExitCode" | "DerivedExitCode" => f::exit_code(job),
        "Elapsed" => f::elapsed(job, now_ms),
        "ElapsedRaw" => match (job.start_ms, job.end_ms) {
            (Some(s), e) => (e.unwrap_or(now_ms).saturating_sub(s) / 1000).to_string(),
            _ => "0".into(),
        },
        "Start" => f::time(job.start_ms),
        "End" => f::time(job.end_ms),
        "Submit" | "Eligible" => f::time(Some(job.submit_ms)),
        "NodeList" => f::node_list(job),
        "AllocTRES" if ran => f::tres(job),
        "AllocTRES" => String::new(),
        "ReqTRES" => f::tres(job),
        "ReqMem" => format!("{mem}M"),
        "AllocCPUS" | "NCPUS" if !ran => "0".into(),
        "AllocCPUS" | "NCPUS" | "ReqCPUS" => cpus.to_string(),
        "NNodes" | "AllocNodes" | "ReqNodes" => f::node_count(job).to_string(),
        "NTasks" => tasks.to_string(),
        "Partition" => job.spec.queue.clone(),
        "Account" => job.spec.account.clone(),
        "User" => job.spec.user.clone(),
        "Timelimit" => f::time_limit(job),
        "TimelimitRaw" => (job.spec.time_limit_s / 60).to_string(),
        "Reason" => f::reason(job),
        "WorkDir" => job.spec.workdir.clone().unwrap_or_default(),
        "ArrayJobID" => job
            .array
            .map_or_else(String::new, |a| a.array_id.to_string()),
        "ArrayTaskID" => job.array.map_or_else(String::new, |a| a.index.to_string()),
        "QOS" => "normal".into(),
        "Priority" => job.tier.to_string(),
        "Restarts" => job.requeues.to_string(),
        _ => String::new(),
    }
}

/// The jobs `-j` names: ids, arrays (every member) and members `64_3`; steps (`64.batch`)
/// name their job.
fn named_jobs(client: &Client, list: &[String]) -> Result<Vec<JobRecord>> {
    let mut out = Vec::new();
    for item in list {
        let item = item.split('.').next().unwrap_or_default();
        let (id, index) = match item.split_once('_') {
            Some((a, i)) => (a, Some(i)),
            None => (item, None),
        };
        let Ok(id) = id.trim().parse::<u64>() else {
            bail!("invalid job id: {item}");
        };
        let Ok(job) = client.job(id) else {
            continue;
        };
        let is_array = job.array.is_some_and(|a| a.array_id == id);
        if !is_array {
            out.push(job);
            continue;
        }
        for m in crate::cancel_cli::members(client, id)? {
            let wanted = index.is_none_or(|i| m.array.is_some_and(|a| a.index.to_string() == i));
            if wanted {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// A time as sacct reads `-S`/`-E`: `now-N[unit]`, `HH:MM[:SS]` (today), a date with an
/// optional time, `midnight`, `noon`.
fn past_time(text: &str) -> Result<u64> {
    let now = jiff::Zoned::now();
    let now_ms = u64::try_from(now.timestamp().as_millisecond()).unwrap_or(0);
    let lower = text.trim().to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("now-") {
        let ahead =
            crate::begin_time::parse(&format!("now+{rest}"), &now).map_err(anyhow::Error::msg)?;
        return Ok(now_ms.saturating_sub(ahead.saturating_sub(now_ms)));
    }
    let at = crate::begin_time::parse(text, &now).map_err(anyhow::Error::msg)?;
    // A time of day is today's, even when it has passed (`--begin` takes tomorrow's).
    if at > now_ms && !text.contains('-') && !lower.starts_with("now") {
        return Ok(at.saturating_sub(86_400_000));
    }
    Ok(at)
}

/// Midnight today, local time, in ms (sacct's default `-S`).
fn midnight() -> u64 {
    let now = jiff::Zoned::now();
    now.start_of_day().map_or(0, |d| {
        u64::try_from(d.timestamp().as_millisecond()).unwrap_or(0)
    })
}

/// Runs `sacct ARGS`.
pub(super) fn run(client: &Client, args: &[String]) -> Result<i32> {
    let line = args::parse(OPTIONS, args, false)?;
    if line.has("help") {
        println!(
            "Usage: sacct [-j ids] [-u user|-a] [-S time] [-E time] [-s states] [-X] [-n] [-P|-p] [-o fields]"
        );
        return Ok(0);
    }
    let format = match (line.value("format"), line.has("brief"), line.has("long")) {
        (Some(f), ..) => f.to_string(),
        (None, true, _) => BRIEF_FORMAT.into(),
        (None, _, true) => LONG_FORMAT.into(),
        _ => DEFAULT_FORMAT.into(),
    };
    let mut columns: Vec<Column> = Vec::new();
    for mut c in named_fields(&format, '%') {
        let Some((name, width)) = field(&c.field) else {
            bail!("Invalid field requested: \"{}\"", c.field);
        };
        c.field = name.into();
        c.width = Some(c.width.unwrap_or(width));
        columns.push(c);
    }
    let now = super::now_ms();
    let states: Vec<&str> = line
        .list("state")
        .iter()
        .map(|s| crate::state_names::gantry_states(s))
        .collect::<Result<Vec<_>>>()?
        .concat();
    let mut jobs = if line.has("jobs") {
        named_jobs(client, &line.list("jobs"))?
    } else {
        let mut q = Vec::new();
        let users = line.list("user");
        match (line.has("allusers"), users.as_slice()) {
            (true, _) => {}
            (false, []) => q.push(format!("user={}", percent_encode(&super::current_user()))),
            (false, [one]) => q.push(format!("user={}", percent_encode(one))),
            (false, _) => {}
        }
        let since = match line.value("starttime") {
            Some(t) => past_time(t)?,
            None => midnight(),
        };
        q.push(format!("since={since}"));
        let (mut all, _) = crate::history_cli::fetch(client, &q.join("&"), true)?;
        if users.len() > 1 {
            all.retain(|j| users.contains(&j.spec.user));
        }
        all
    };
    if let Some(end) = line.value("endtime") {
        let end = past_time(end)?;
        jobs.retain(|j| j.submit_ms <= end);
    }
    if !states.is_empty() {
        jobs.retain(|j| states.contains(&j.state.as_str()));
    }
    if let Some(name) = line.value("name") {
        let names: Vec<&str> = name.split(',').collect();
        jobs.retain(|j| names.contains(&j.spec.name.as_str()));
    }
    jobs.sort_by_key(|j| j.id);
    jobs.dedup_by_key(|j| j.id);
    let parsable = line.has("parsable2") || line.has("parsable");
    let delimiter = line.value("delimiter").unwrap_or("|");
    let trailing = if line.has("parsable") { delimiter } else { "" };
    let row = |cells: Vec<String>| {
        if parsable {
            format!("{}{trailing}", cells.join(delimiter))
        } else {
            cells.join(" ")
        }
    };
    let shape = |text: &str, c: &Column| {
        if parsable {
            text.to_string()
        } else {
            cell(text, c)
        }
    };
    if !line.has("noheader") {
        println!(
            "{}",
            row(columns.iter().map(|c| shape(&c.field, c)).collect())
        );
        if !parsable {
            println!(
                "{}",
                row(columns
                    .iter()
                    .map(|c| "-".repeat(c.width.unwrap_or(10)))
                    .collect())
            );
        }
    }
    for job in &jobs {
        println!(
            "{}",
            row(columns
                .iter()
                .map(|c| shape(&value(job, &c.field, now), c))
                .collect())
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_without_case_and_unknown_ones_are_not() {
        assert_eq!(field("jobid"), Some(("JobID", 12)));
        assert_eq!(field("NodeList").map(|f| f.0), Some("NodeList"));
        assert_eq!(field("Frobnicate"), None);
    }

    #[test]
    fn past_times_read_as_sacct_reads_them() {
        let now = super::super::now_ms();
        let hour_ago = past_time("now-1hours").unwrap();
        assert!(
            now - hour_ago >= 3_599_000 && now - hour_ago <= 3_601_000,
            "{}",
            now - hour_ago
        );
        assert!(past_time("00:00").unwrap() <= now);
        assert!(past_time("2026-01-02T03:04:05").is_ok());
        assert!(past_time("yesterdayish").is_err());
    }
}
