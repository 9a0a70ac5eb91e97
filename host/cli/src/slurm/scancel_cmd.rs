//! `scancel`: cancels jobs, or sends them a signal (`-s`/`--signal`), named by id, array
//! (`64`, every member), member (`64_3`), or selected by `-u`, `--me`, `-t`, `-n`, `-p`,
//! `-A`. Options and ids may come in any order (`scancel 12 --signal USR2`). A job that has
//! already ended is reported and is not a failure, as in SLURM; an id that does not exist is.
//!
//! Owns: scancel's options. Does not own resolving ids (`cancel_cli::named`) or the cancel
//! (the daemon).

use super::args::{self, Opt, Takes};
use crate::cli::{Client, percent_encode};
use crate::state_names::gantry_states;
use anyhow::{Result, bail};
use std::collections::BTreeSet;

const OPTIONS: &[Opt] = &[
    ("signal", Some('s'), Takes::Value),
    ("user", Some('u'), Takes::Value),
    ("me", None, Takes::Nothing),
    ("state", Some('t'), Takes::Value),
    ("name", Some('n'), Takes::Value),
    ("jobname", None, Takes::Value),
    ("partition", Some('p'), Takes::Value),
    ("account", Some('A'), Takes::Value),
    ("batch", Some('b'), Takes::Nothing),
    ("full", Some('f'), Takes::Nothing),
    ("hurry", Some('H'), Takes::Nothing),
    ("quiet", Some('Q'), Takes::Nothing),
    ("verbose", Some('v'), Takes::Nothing),
    ("interactive", Some('i'), Takes::Nothing),
    ("help", Some('h'), Takes::Nothing),
];

/// The signal name Gantry sends for `text` (`SIGUSR2`, `USR2`, `12`).
fn signal_name(text: &str) -> Result<String> {
    let t = text.trim().to_ascii_uppercase();
    let t = t.strip_prefix("SIG").unwrap_or(&t).to_string();
    let by_number = [
        (1, "HUP"),
        (2, "INT"),
        (3, "QUIT"),
        (10, "USR1"),
        (12, "USR2"),
        (14, "ALRM"),
        (15, "TERM"),
        (18, "CONT"),
        (23, "URG"),
        (28, "WINCH"),
    ];
    if let Ok(n) = t.parse::<u32>() {
        return match by_number.iter().find(|(k, _)| *k == n) {
            Some((_, name)) => Ok((*name).to_string()),
            None => bail!(
                "signal {n}: Gantry sends HUP, INT, QUIT, USR1, USR2, ALRM, TERM, CONT, URG or WINCH (to kill, cancel without --signal)"
            ),
        };
    }
    if t == "KILL" {
        bail!(
            "--signal KILL: cancel the job instead (scancel ID): Gantry stops it with TERM, then KILL"
        );
    }
    Ok(t)
}

/// Runs `scancel ARGS`.
pub(super) fn run(client: &Client, args: &[String]) -> Result<i32> {
    let line = args::parse(OPTIONS, args, false)?;
    if line.has("help") {
        println!(
            "Usage: scancel [-s signal] [-u user|--me] [-t states] [-n name] [job_id[_array_id]]..."
        );
        return Ok(0);
    }
    let signal = line.value("signal").map(signal_name).transpose()?;
    let user = match (line.value("user"), line.has("me")) {
        (Some(u), _) => Some(u.to_string()),
        (None, true) => Some(super::current_user()),
        (None, false) => None,
    };
    let states: Vec<&str> = match line.value("state") {
        Some(list) => list
            .split(',')
            .map(gantry_states)
            .collect::<Result<Vec<_>>>()?
            .concat(),
        None => vec!["pending", "running"],
    };
    let name = line.value("name").or(line.value("jobname"));
    let partition = line.value("partition");
    let account = line.value("account");
    let filtered = user.is_some()
        || line.has("state")
        || name.is_some()
        || partition.is_some()
        || account.is_some();
    let ids: Vec<String> = line
        .operands
        .iter()
        .flat_map(|o| o.split(','))
        .map(str::to_string)
        .collect();
    if ids.is_empty() && !filtered {
        bail!("No job identification provided");
    }
    let mut chosen = BTreeSet::new();
    let mut failed = 0;
    if ids.is_empty() {
        for state in &states {
            let mut q = format!("state={state}");
            if let Some(u) = &user {
                q.push_str(&format!("&user={}", percent_encode(u)));
            }
            let (jobs, _) = crate::history_cli::fetch(client, &q, true)?;
            chosen.extend(jobs.iter().map(|j| j.id));
        }
    } else {
        for arg in &ids {
            match crate::cancel_cli::named(client, arg) {
                Ok(found) => chosen.extend(found),
                Err(_) => {
                    failed += 1;
                    eprintln!(
                        "scancel: error: Kill job error on job id {arg}: Invalid job id specified"
                    );
                }
            }
        }
    }
    for id in chosen {
        let Ok(job) = client.job(id) else {
            failed += 1;
            eprintln!("scancel: error: Kill job error on job id {id}: Invalid job id specified");
            continue;
        };
        let keep = user.as_ref().is_none_or(|u| &job.spec.user == u)
            && states.contains(&job.state.as_str())
            && name.is_none_or(|n| job.spec.name == n)
            && partition.is_none_or(|p| job.spec.queue == p)
            && account.is_none_or(|a| job.spec.account == a);
        if filtered && !keep {
            continue;
        }
        if job.state.is_terminal() {
            if !line.has("quiet") {
                eprintln!(
                    "scancel: error: Kill job error on job id {id}: Job/step already completing or completed"
                );
            }
            continue;
        }
        let done = match &signal {
            Some(sig) => client.signal(id, sig),
            None => client.cancel(id).map(|_| ()),
        };
        if let Err(e) = done {
            failed += 1;
            eprintln!("scancel: error: Kill job error on job id {id}: {e:#}");
        }
    }
    Ok(i32::from(failed > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(signal_name("SIGUSR2").unwrap(), "USR2");
        assert_eq!(signal_name("usr1").unwrap(), "USR1");
        assert_eq!(signal_name("15").unwrap(), "TERM");
        assert!(signal_name("9").is_err());
        assert!(signal_name("KILL").is_err());
    }
}
