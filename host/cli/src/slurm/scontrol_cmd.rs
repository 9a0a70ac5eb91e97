//! `scontrol`: `show job [ID]`, `show node [NAME]`, `show partition`, `show hostnames
//! [LIST]` and `show hostlist LIST`; `hold`, `release` and `requeue` of ids, arrays and
//! members; `update JobId=ID TimeLimit=... Dependency=...`. Keys are read without case, as
//! SLURM's.
//!
//! Owns: scontrol's words. Does not own the job layout (`show_job`) or the requests
//! (`control_cli`).

use crate::cli::Client;
use anyhow::{Result, bail};

/// Runs `scontrol ARGS`.
pub(super) fn run(client: &Client, args: &[String]) -> Result<i32> {
    // Flags before the command (`-o`, `--oneliner`, `-d`, `--details`) change nothing here.
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|w| {
            !matches!(
                *w,
                "-o" | "--oneliner" | "-d" | "--details" | "-Q" | "--quiet"
            )
        })
        .collect();
    let Some((verb, rest)) = words.split_first() else {
        bail!("give a command: show, hold, release, requeue or update");
    };
    let rest: Vec<String> = rest.iter().map(|s| (*s).to_string()).collect();
    match verb.to_ascii_lowercase().as_str() {
        "show" => show(client, &rest),
        "hold" | "uhold" => crate::control_cli::hold_all(client, &rest).map(|()| 0),
        "release" => crate::control_cli::release_all(client, &rest).map(|()| 0),
        "requeue" => crate::control_cli::requeue_all(client, &rest).map(|()| 0),
        "update" => update(client, &rest),
        "ping" => {
            let health = client.health()?;
            println!("Slurmctld(primary) at {} is UP ({health})", client.server());
            Ok(0)
        }
        other => bail!(
            "invalid keyword: {other} (Gantry's scontrol: show, hold, release, requeue, update, ping)"
        ),
    }
}

fn show(client: &Client, args: &[String]) -> Result<i32> {
    let Some((what, rest)) = args.split_first() else {
        bail!("show what? job, node, partition, hostnames or hostlist");
    };
    match what.to_ascii_lowercase().as_str() {
        "job" | "jobs" => {
            let jobs = match rest.first() {
                Some(arg) => {
                    let ids = crate::cancel_cli::named(client, arg)
                        .map_err(|_| anyhow::anyhow!("Invalid job id specified"))?;
                    let mut jobs = Vec::new();
                    for id in ids {
                        jobs.push(
                            client
                                .job(id)
                                .map_err(|_| anyhow::anyhow!("Invalid job id specified"))?,
                        );
                    }
                    jobs
                }
                None => {
                    let mut all = Vec::new();
                    for state in ["pending", "running"] {
                        all.extend(
                            crate::history_cli::fetch(client, &format!("state={state}"), true)?.0,
                        );
                    }
                    all
                }
            };
            let now = super::now_ms();
            for job in &jobs {
                let state = super::job_fields::state_long(job);
                for line in crate::show_job::render(job, now) {
                    let line = line.replace(
                        &format!("JobState={} ", job.state.as_str()),
                        &format!("JobState={state} "),
                    );
                    println!("{line}");
                }
                println!(
                    "   NodeList={} BatchHost={} NumNodes={}",
                    super::job_fields::node_list(job),
                    job.tasks.first().map_or("(null)", |t| t.node.as_str()),
                    super::job_fields::node_count(job)
                );
                println!();
            }
            Ok(0)
        }
        "hostnames" => {
            let list = match rest.first() {
                Some(l) => l.clone(),
                None => std::env::var("SLURM_JOB_NODELIST")
                    .map_err(|_| anyhow::anyhow!("give a hostlist, or run inside a job"))?,
            };
            for name in gantry_api::hostlist::expand(&list).map_err(anyhow::Error::msg)? {
                println!("{name}");
            }
            Ok(0)
        }
        "hostlist" => {
            let Some(list) = rest.first() else {
                bail!("give host names: scontrol show hostlist a1,a2,a3");
            };
            let names = gantry_api::hostlist::expand(list).map_err(anyhow::Error::msg)?;
            println!("{}", gantry_api::hostlist::compress(&names));
            Ok(0)
        }
        "node" | "nodes" => {
            for n in client.nodes()? {
                if rest.first().is_some_and(|want| *want != n.name) {
                    continue;
                }
                let gpus = n.gpus.len();
                println!(
                    "NodeName={} State={} CPUTot={} RealMemory={} Gres=gpu:{gpus}\n   AllocMem={} CPUAlloc={}\n",
                    n.name,
                    super::sinfo_cmd::node_state(&n).to_ascii_uppercase(),
                    n.cpu_milli / 1000,
                    n.memory_mib,
                    n.memory_mib_allocated,
                    n.cpu_milli_allocated.div_ceil(1000),
                );
            }
            Ok(0)
        }
        "partition" | "partitions" => {
            let nodes = client.nodes()?;
            let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
            println!(
                "PartitionName=default\n   Default=YES State=UP Nodes={} TotalNodes={}\n",
                gantry_api::hostlist::compress(&names),
                names.len()
            );
            Ok(0)
        }
        other => bail!("invalid entity: {other} for keyword: show"),
    }
}

/// `update JobId=ID TimeLimit=T Dependency=D`.
fn update(client: &Client, args: &[String]) -> Result<i32> {
    let (mut id, mut time, mut dependency) = (None, None, None);
    for word in args {
        let Some((key, value)) = word.split_once('=') else {
            bail!("invalid input: {word} (give Key=Value)");
        };
        match key.to_ascii_lowercase().as_str() {
            "jobid" | "job" => id = Some(value.to_string()),
            "timelimit" => time = Some(value.to_string()),
            "dependency" => dependency = Some(value.to_string()),
            other => {
                bail!("Update of {other} is not supported by Gantry (TimeLimit and Dependency are)")
            }
        }
    }
    let Some(id) = id else {
        bail!("give JobId=ID");
    };
    for job in crate::cancel_cli::named(client, &id)? {
        crate::control_cli::update(client, job, time.as_deref(), dependency.as_deref())?;
    }
    Ok(0)
}
