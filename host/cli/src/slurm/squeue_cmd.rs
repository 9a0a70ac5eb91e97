//! `squeue`: pending and running jobs (and, with `-j`, those that ended in the last five
//! minutes, as SLURM keeps them) in squeue's formats: `-h`, `-j`, `-u`, `--me`, `-t`, `-n`,
//! `-p`, `-A`, `-l`, `--start`, `-o "%.18i %j %T ..."` and `-O "JobID:20,State"` with the
//! common fields. An array's members are one line each (as `squeue -r`).
//!
//! Owns: squeue's options, fields and layout. Does not own the job list (the API) or the
//! spellings of states and times (`job_fields`).

use super::args::{self, Opt, Takes};
use super::job_fields as f;
use super::text_format::{Column, Piece, cell, named_fields, percent_format};
use crate::cli::{Client, percent_encode};
use crate::squeue_view::slurm_duration;
use anyhow::{Result, bail};
use gantry_api::model::{JobRecord, JobState};

const OPTIONS: &[Opt] = &[
    ("noheader", Some('h'), Takes::Nothing),
    ("jobs", Some('j'), Takes::Value),
    ("user", Some('u'), Takes::Value),
    ("me", None, Takes::Nothing),
    ("states", Some('t'), Takes::Value),
    ("name", Some('n'), Takes::Value),
    ("partition", Some('p'), Takes::Value),
    ("account", Some('A'), Takes::Value),
    ("format", Some('o'), Takes::Value),
    ("Format", Some('O'), Takes::Value),
    ("long", Some('l'), Takes::Nothing),
    ("start", None, Takes::Nothing),
    ("array", Some('r'), Takes::Nothing),
    ("all", Some('a'), Takes::Nothing),
    ("sort", Some('S'), Takes::Value),
    ("noconvert", None, Takes::Nothing),
    ("verbose", Some('v'), Takes::Nothing),
    ("help", None, Takes::Nothing),
];

const DEFAULT_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
const LONG_FORMAT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
const START_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R";

/// How long an ended job is still shown when named (SLURM's `MinJobAge` default).
const ENDED_SHOWN_MS: u64 = 300_000;

/// The `%` letter of a `-O` field name.
fn letter_of(name: &str) -> Option<&'static str> {
    const NAMES: &[(&str, &str)] = &[
        ("jobid", "i"),
        ("jobarrayid", "i"),
        ("arrayjobid", "F"),
        ("arraytaskid", "K"),
        ("name", "j"),
        ("state", "T"),
        ("statecompact", "t"),
        ("timeused", "M"),
        ("timelimit", "l"),
        ("timeleft", "L"),
        ("numnodes", "D"),
        ("reasonlist", "R"),
        ("reason", "r"),
        ("username", "u"),
        ("userid", "u"),
        ("partition", "P"),
        ("account", "a"),
        ("batchhost", "B"),
        ("nodelist", "N"),
        ("starttime", "S"),
        ("submittime", "V"),
        ("numcpus", "C"),
        ("tres-per-node", "b"),
        ("qos", "q"),
        ("workdir", "Z"),
        ("command", "o"),
        ("priority", "Q"),
    ];
    let lower = name.to_ascii_lowercase();
    NAMES.iter().find(|(n, _)| *n == lower).map(|(_, l)| *l)
}

/// The header of field `letter`.
fn header(letter: &str) -> &'static str {
    match letter {
        "i" | "A" => "JOBID",
        "F" => "ARRAY_JOB_ID",
        "K" => "ARRAY_TASK_ID",
        "j" => "NAME",
        "T" => "STATE",
        "t" => "ST",
        "M" => "TIME",
        "l" => "TIME_LIMIT",
        "L" => "TIME_LEFT",
        "D" => "NODES",
        "R" => "NODELIST(REASON)",
        "r" => "REASON",
        "u" => "USER",
        "P" => "PARTITION",
        "a" => "ACCOUNT",
        "B" => "EXEC_HOST",
        "N" => "NODELIST",
        "S" => "START_TIME",
        "V" => "SUBMIT_TIME",
        "C" => "CPUS",
        "b" => "TRES_PER_NODE",
        "q" => "QOS",
        "Z" => "WORK_DIR",
        "o" => "COMMAND",
        "Q" => "PRIORITY",
        _ => "",
    }
}

/// Field `letter` of `job` at `now`.
fn value(letter: &str, job: &JobRecord, now: u64) -> String {
    let pending = job.state == JobState::Pending;
    let used_s = match (job.start_ms, job.end_ms) {
        (Some(s), e) => e.unwrap_or(now).saturating_sub(s) / 1000,
        _ => 0,
    };
    match letter {
        "i" => f::job_id(job),
        "A" => job.id.to_string(),
        "F" => job.array.map_or(job.id, |a| a.array_id).to_string(),
        "K" => job
            .array
            .map_or_else(|| "N/A".into(), |a| a.index.to_string()),
        "j" => job.spec.name.clone(),
        "T" => f::state_long(job).into(),
        "t" => f::state_short(job).into(),
        "M" => slurm_duration(used_s),
        "l" => f::time_limit(job),
        "L" => match job.spec.time_limit_s {
            0 => "UNLIMITED".into(),
            l => slurm_duration(l.saturating_sub(used_s)),
        },
        "D" => f::node_count(job).to_string(),
        "R" => f::reason_or_nodes(job),
        "r" => f::reason(job),
        "u" => job.spec.user.clone(),
        "P" => job.spec.queue.clone(),
        "a" => job.spec.account.clone(),
        "B" if pending => "n/a".into(),
        "B" => job
            .tasks
            .first()
            .map_or_else(|| "n/a".into(), |t| t.node.clone()),
        "N" if pending => String::new(),
        "N" => f::node_list(job),
        // The forecast's median start (`gantry jobs --start`), as squeue --start shows
        // the expected start; N/A before the first forecast or when it never starts.
        "S" if pending => match job.start_forecast.as_ref().and_then(|f| f.p50_ms) {
            Some(at) => f::time(Some(at)),
            None => "N/A".into(),
        },
        "S" => f::time(job.start_ms),
        "V" => f::time(Some(job.submit_ms)),
        "C" => f::requested(job).1.to_string(),
        "b" => match f::requested(job).2 {
            0 => "N/A".into(),
            g => format!("gres/gpu:{g}"),
        },
        "q" => "normal".into(),
        "Z" => job.spec.workdir.clone().unwrap_or_default(),
        "o" => job
            .spec
            .script
            .as_ref()
            .map_or_else(|| job.spec.argv.join(" "), |_| "(batch script)".into()),
        "Q" => job.tier.to_string(),
        _ => String::new(),
    }
}

/// The jobs named by `-j`: pending and running ones, and those ended a moment ago.
fn named(client: &Client, list: &[String], now: u64) -> Result<Vec<JobRecord>> {
    let mut out = Vec::new();
    for item in list {
        let Ok(ids) = crate::cancel_cli::named(client, item) else {
            bail!("Invalid job id specified");
        };
        for id in ids {
            if let Ok(job) = client.job(id)
                && (!job.state.is_terminal()
                    || job.end_ms.is_some_and(|e| e + ENDED_SHOWN_MS >= now))
            {
                out.push(job);
            }
        }
    }
    Ok(out)
}

/// Runs `squeue ARGS`.
pub(super) fn run(client: &Client, args: &[String]) -> Result<i32> {
    let line = args::parse(OPTIONS, args, false)?;
    if line.has("help") {
        println!(
            "Usage: squeue [-h] [-j ids] [-u users|--me] [-t states] [-o format|-O fields] [--start]"
        );
        return Ok(0);
    }
    let now = super::now_ms();
    let columns: Vec<Piece> = match (line.value("Format"), line.value("format")) {
        (Some(fields), _) => {
            let mut out = Vec::new();
            for c in named_fields(fields, ':') {
                let Some(letter) = letter_of(&c.field) else {
                    bail!("Invalid job format specification: {}", c.field);
                };
                out.push(Piece::Field(Column {
                    field: letter.into(),
                    width: Some(c.width.unwrap_or(20)),
                    right: c.right,
                }));
                out.push(Piece::Text(" ".into()));
            }
            out
        }
        (None, Some(fmt)) => percent_format(fmt),
        (None, None) if line.has("start") => percent_format(START_FORMAT),
        (None, None) if line.has("long") => percent_format(LONG_FORMAT),
        (None, None) => percent_format(DEFAULT_FORMAT),
    };
    let states: Vec<&str> = match line.value("states") {
        Some(list) => list
            .split(',')
            .map(crate::state_names::gantry_states)
            .collect::<Result<Vec<_>>>()?
            .concat(),
        None if line.has("start") => vec!["pending"],
        None => vec!["pending", "running"],
    };
    let mut users = line.list("user");
    if line.has("me") {
        users.push(super::current_user());
    }
    let mut jobs = if line.has("jobs") {
        named(client, &line.list("jobs"), now)?
    } else {
        let mut all = Vec::new();
        for state in &states {
            let mut q = format!("state={state}");
            if let [one] = users.as_slice() {
                q.push_str(&format!("&user={}", percent_encode(one)));
            }
            all.extend(crate::history_cli::fetch(client, &q, true)?.0);
        }
        all
    };
    if line.has("jobs") && line.has("states") {
        jobs.retain(|j| states.contains(&j.state.as_str()));
    }
    let keep = |list: Vec<String>, v: &str| list.is_empty() || list.iter().any(|x| x == v);
    jobs.retain(|j| {
        keep(users.clone(), &j.spec.user)
            && keep(line.list("name"), &j.spec.name)
            && keep(line.list("partition"), &j.spec.queue)
            && keep(line.list("account"), &j.spec.account)
    });
    jobs.sort_by_key(|j| j.id);
    jobs.dedup_by_key(|j| j.id);
    let render = |f: &dyn Fn(&str) -> String| -> String {
        columns
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Field(c) => cell(&f(&c.field), c),
            })
            .collect::<String>()
            .trim_end()
            .to_string()
    };
    if !line.has("noheader") {
        println!("{}", render(&|l| header(l).to_string()));
    }
    for job in &jobs {
        println!("{}", render(&|l| value(l, job, now)));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn format_names_map_to_letters() {
        assert_eq!(super::letter_of("JobID"), Some("i"));
        assert_eq!(super::letter_of("statecompact"), Some("t"));
        assert_eq!(super::letter_of("nonsense"), None);
    }
}
