//! `gantry service`: replicated services, as `kubectl` shows Deployments. `create FILE`
//! (a job spec in JSON, kind `service`), `ls`, `show ID`, `scale ID N`, `stop ID`, with
//! each replica's job, state, node, port, health and restarts.
//!
//! Owns: these commands and their tables. Does not own the services (the daemon's
//! `/v1/services`).

use anyhow::Context;
use gantry_api::client::Client;
use gantry_api::model::{HealthState, JobSpec, ServiceView};
use std::path::PathBuf;

/// Options of `gantry service`.
#[derive(Debug, clap::Args)]
pub struct ServiceArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ServiceAction,
    /// Print the daemon's answer as JSON (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
}

/// What `gantry service` does.
#[derive(Debug, clap::Subcommand)]
pub enum ServiceAction {
    /// Create a replicated service from a job spec in JSON (kind `service`; its
    /// `service.replicas` copies, or `--replicas`).
    Create {
        /// The job spec (JSON, as `POST /v1/jobs` takes; `-` for standard input).
        file: PathBuf,
        /// How many replicas (overrides the file's `service.replicas`).
        #[arg(long)]
        replicas: Option<u32>,
    },
    /// List services: replicas live and wanted, revision, owner.
    Ls,
    /// One service with each replica's job, state, node, port, health and restarts.
    Show {
        /// Service id.
        id: u64,
    },
    /// Set the number of replicas.
    Scale {
        /// Service id.
        id: u64,
        /// Replicas wanted.
        replicas: u32,
    },
    /// Stop a service: its replicas are cancelled.
    Stop {
        /// Service id.
        id: u64,
    },
}

/// Runs `gantry service`.
pub fn run(client: &Client, args: &ServiceArgs) -> anyhow::Result<()> {
    let views = match &args.action {
        ServiceAction::Create { file, replicas } => {
            let mut spec = read_spec(file)?;
            spec.kind = gantry_contract::JobKind::Service;
            if let Some(n) = replicas {
                spec.service.get_or_insert_with(Default::default).replicas = *n;
            }
            vec![client.create_service(&spec)?]
        }
        ServiceAction::Ls => client.services()?,
        ServiceAction::Show { id } => vec![client.service(*id)?],
        ServiceAction::Scale { id, replicas } => vec![client.scale_service(*id, *replicas)?],
        ServiceAction::Stop { id } => vec![client.stop_service(*id)?],
    };
    if args.json {
        let value = match args.action {
            ServiceAction::Ls => serde_json::to_value(&views)?,
            _ => serde_json::to_value(views.first())?,
        };
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let lines = match args.action {
        ServiceAction::Ls => list_lines(&views),
        _ => views.iter().flat_map(detail_lines).collect(),
    };
    lines.iter().for_each(|l| println!("{l}"));
    Ok(())
}

fn read_spec(file: &PathBuf) -> anyhow::Result<JobSpec> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    serde_json::from_str(&text).with_context(|| format!("{} is not a job spec", file.display()))
}

/// `gantry service ls`: one line a service.
pub fn list_lines(views: &[ServiceView]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<6} {:<24} {:>8} {:>8} {:<12} STATUS",
        "ID", "NAME", "REPLICAS", "REVISION", "USER"
    )];
    for v in views {
        let s = &v.service;
        let running = v
            .replica_jobs
            .iter()
            .filter(|r| r.state == "running")
            .count();
        let status = if s.stopped {
            "stopped".to_string()
        } else if let Some(e) = &s.last_error {
            format!("cannot make a replica: {e}")
        } else {
            "ok".to_string()
        };
        out.push(format!(
            "{:<6} {:<24} {:>8} {:>8} {:<12} {status}",
            s.id,
            s.name,
            format!("{running}/{}", s.replicas),
            s.revision,
            s.template.user,
        ));
    }
    out
}

/// `gantry service show ID`: the service, then one line a replica.
pub fn detail_lines(v: &ServiceView) -> Vec<String> {
    let s = &v.service;
    let mut out = vec![format!(
        "service {} ({}): {} replica(s) wanted, revision {}{}",
        s.id,
        s.name,
        s.replicas,
        s.revision,
        if s.stopped { ", stopped" } else { "" }
    )];
    if let Some(e) = &s.last_error {
        out.push(format!("cannot make a replica: {e}"));
    }
    out.push(format!(
        "{:<8} {:<10} {:<16} {:>6} {:<10} {:>8} REASON",
        "JOB", "STATE", "NODE", "PORT", "HEALTH", "RESTARTS"
    ));
    for r in &v.replica_jobs {
        let health = match r.health {
            Some(HealthState::Healthy) => "healthy",
            Some(HealthState::Unhealthy) => "unhealthy",
            Some(HealthState::Starting) => "starting",
            Some(HealthState::Unchecked) | None => "-",
        };
        out.push(format!(
            "{:<8} {:<10} {:<16} {:>6} {:<10} {:>8} {}",
            r.job,
            r.state,
            r.node.as_deref().unwrap_or("-"),
            r.port.map_or("-".into(), |p| p.to_string()),
            health,
            r.restarts,
            r.reason.as_deref().unwrap_or("")
        ));
    }
    out
}
