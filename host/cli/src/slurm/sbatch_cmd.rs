//! `sbatch`: submits a batch script (a file, `--wrap CMD`, or the script on stdin) with
//! sbatch's options: the command line overrides `SBATCH_*` variables, which override the
//! script's `#SBATCH` lines, as in SLURM. Prints `Submitted batch job ID`, or only `ID`
//! with `--parsable` (an array's id is its first member's, as SLURM's). An option SLURM
//! has and Gantry does not serve is accepted with a one-line note; a word that is no sbatch
//! option, an impossible request or a bad value is an error, and nothing is submitted.
//!
//! Owns: sbatch's command line and output. Does not own the option table (`sbatch`) or
//! the job spec (`submit_cli::build_with`).

use crate::cli::Client;
use crate::sbatch::{self, Parsed};
use crate::submit_cli;
use anyhow::{Result, anyhow, bail};
use serde_json::Value;
use std::io::Read;

/// The `SBATCH_*` variables sbatch reads, and the option each stands for.
const INPUT_VARIABLES: &[(&str, &str)] = &[
    ("SBATCH_ACCOUNT", "account"),
    ("SBATCH_ARRAY_INX", "array"),
    ("SBATCH_CONSTRAINT", "constraint"),
    ("SBATCH_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SBATCH_EXCLUSIVE", "exclusive"),
    ("SBATCH_EXPORT", "export"),
    ("SBATCH_GPUS", "gpus"),
    ("SBATCH_GPUS_PER_NODE", "gpus-per-node"),
    ("SBATCH_GPUS_PER_TASK", "gpus-per-task"),
    ("SBATCH_GRES", "gres"),
    ("SBATCH_JOB_NAME", "job-name"),
    ("SBATCH_MEM_PER_CPU", "mem-per-cpu"),
    ("SBATCH_MEM_PER_GPU", "mem-per-gpu"),
    ("SBATCH_MEM_PER_NODE", "mem"),
    ("SBATCH_NO_REQUEUE", "no-requeue"),
    ("SBATCH_OPEN_MODE", "open-mode"),
    ("SBATCH_PARTITION", "partition"),
    ("SBATCH_QOS", "qos"),
    ("SBATCH_REQUEUE", "requeue"),
    ("SBATCH_RESERVATION", "reservation"),
    ("SBATCH_SIGNAL", "signal"),
    ("SBATCH_TIMELIMIT", "time"),
    ("SBATCH_WCKEY", "wckey"),
];

/// Options that are flags when they come from a variable (its value is not passed).
const FLAG_VARIABLES: &[&str] = &["exclusive", "no-requeue", "requeue"];

/// The options the `SBATCH_*` variables of `vars` give.
fn from_variables(vars: impl Iterator<Item = (String, String)>) -> Result<Parsed> {
    let mut words = Vec::new();
    for (name, value) in vars {
        let Some((_, long)) = INPUT_VARIABLES.iter().find(|(v, _)| *v == name) else {
            continue;
        };
        words.push(if FLAG_VARIABLES.contains(long) {
            format!("--{long}")
        } else {
            format!("--{long}={value}")
        });
    }
    let line = sbatch::parse_command_line(&words)
        .map_err(|e| anyhow!("{} (from an SBATCH_ variable): {}", e.directive, e.message))?;
    Ok(line.parsed)
}

/// The script sbatch runs: `--wrap`'s command, the file named, or stdin.
fn script_text(wrap: Option<&str>, file: Option<&str>) -> Result<(String, String)> {
    match (wrap, file) {
        (Some(_), Some(_)) => bail!("script arguments not permitted with --wrap option"),
        (Some(cmd), None) => Ok((
            "wrap".into(),
            format!("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{cmd}\n"),
        )),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow!("unable to open file {path}: {e}"))?;
            Ok((path.to_string(), text))
        }
        (None, None) => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| anyhow!("cannot read the batch script from stdin: {e}"))?;
            Ok(("stdin".into(), text))
        }
    }
}

/// Runs `sbatch ARGS`.
pub(super) fn run(client: &Client, args: &[String]) -> Result<i32> {
    if args.iter().any(|a| a == "--help" || a == "--usage") {
        println!(
            "Usage: sbatch [OPTIONS] script [args...]   (Gantry: see docs/user/slurm-clients.md)"
        );
        return Ok(0);
    }
    let line =
        sbatch::parse_command_line(args).map_err(|e| anyhow!("{}: {}", e.directive, e.message))?;
    let from_vars = from_variables(std::env::vars())?;
    let flags = from_vars
        .options
        .clone()
        .overridden_by(line.parsed.options.clone());
    let (name, text) = script_text(flags.wrap.as_deref(), line.script.as_deref())?;
    if !line.script_args.is_empty() {
        bail!(
            "arguments after the script ({}) are not supported by Gantry: put them in the \
             script, or pass them as variables with --export=ALL,NAME=value",
            line.script_args.join(" ")
        );
    }
    if !text.starts_with("#!") {
        bail!(
            "This does not look like a batch script.  The first\n\
             sbatch: error: line must start with #! followed by the path to an interpreter.\n\
             sbatch: error: For instance: #!/bin/sh"
        );
    }
    let directives = submit_cli::read_script(&name, &text)?;
    let options = directives.options.clone().overridden_by(flags);
    let quiet = options.quiet == Some(true);
    let parsable = options.parsable == Some(true);
    let test_only = options.test_only == Some(true);
    let mut sub = submit_cli::build_with(options, directives, Some((&name, &text)), &[], &[])?;
    if !quiet {
        let shown = from_vars.ignored.iter().chain(&line.parsed.ignored);
        for i in shown.chain(&sub.ignored) {
            eprintln!(
                "sbatch: note: {} {}: {}",
                where_from(i.line),
                i.directive,
                i.reason
            );
        }
        for n in &sub.notes {
            eprintln!("sbatch: note: {n}");
        }
    }
    if client.has_token() {
        if let Some(body) = sub.body.as_object_mut() {
            body.insert("user".into(), Value::String(String::new()));
        }
    } else if !quiet {
        crate::cli::warn_if_anonymous(client);
    }
    if test_only {
        // As sbatch: "Job N to start at T ..." on stderr; the forecast's median and why.
        let f = client.what_if(&sub.body, None)?;
        match f.p50_ms {
            Some(at) => eprintln!(
                "sbatch: Job to start at {}: {} (nothing was submitted)",
                crate::accounting_cli::format_utc(at),
                f.reason
            ),
            None => eprintln!(
                "sbatch: Job would not start: {} (nothing was submitted)",
                f.reason
            ),
        }
        return Ok(0);
    }
    let submitted = client.submit(&sub.body)?;
    let id = submitted.job.array.map_or(submitted.job.id, |a| a.array_id);
    if parsable {
        println!("{id}");
    } else if !quiet {
        println!("Submitted batch job {id}");
    }
    Ok(0)
}

/// Where an option that was not applied came from: the command line (line 0) or a line of
/// the script.
fn where_from(line: usize) -> String {
    match line {
        0 => "option".into(),
        n => format!("#SBATCH (line {n})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn sbatch_variables_become_options() {
        let p = from_variables(vars(&[
            ("SBATCH_PARTITION", "gpu"),
            ("SBATCH_TIMELIMIT", "1:00:00"),
            ("SBATCH_REQUEUE", "1"),
            ("SBATCH_WCKEY", "x"),
            ("HOME", "/root"),
        ]))
        .unwrap();
        assert_eq!(p.options.queue.as_deref(), Some("gpu"));
        assert_eq!(p.options.time_limit_s, Some(3600));
        assert_eq!(p.options.requeue, Some(true));
        assert_eq!(p.ignored.len(), 1, "{:?}", p.ignored);
        assert!(from_variables(vars(&[("SBATCH_TIMELIMIT", "soon")])).is_err());
    }

    #[test]
    fn wrap_makes_a_script_and_refuses_a_file_besides() {
        let (_, text) = script_text(Some("hostname"), None).unwrap();
        assert!(text.starts_with("#!/bin/sh\n") && text.contains("\nhostname\n"));
        assert!(script_text(Some("x"), Some("job.sh")).is_err());
    }
}
