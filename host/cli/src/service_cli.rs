//! `gantry service`: replicated services, as `kubectl` shows Deployments. `create FILE`
//! (a job spec in JSON or YAML, kind `service`, its `service.rollout` and
//! `service.autoscale` sent as they are), `ls`, `show ID`, `scale ID N`, `update ID` (image,
//! command, environment, rolling-update strategy, autoscaling), `history ID`,
//! `rollback ID [--to N]` and `stop ID`.
//!
//! Owns these commands and turning `update`'s flags into an [`UpdateRequest`]. Does not own
//! the services (the daemon's `/v1/services`) nor their text (`service_print`).

use crate::service_print::{detail_lines, history_lines, list_lines};
use anyhow::{Context, bail};
use gantry_api::client::Client;
use gantry_api::model::{AutoscaleSpec, JobSpec, ServiceRecord, ServiceView, UpdateRequest};
use std::path::{Path, PathBuf};

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
    /// Create a replicated service from a job spec in JSON or YAML (kind `service`; its
    /// `service.replicas` copies, or `--replicas`; `service.rollout` and
    /// `service.autoscale` as written).
    Create {
        /// The job spec (as `POST /v1/jobs` takes; `.yaml`/`.yml` is read as YAML; `-` for
        /// standard input).
        file: PathBuf,
        /// How many replicas (overrides the file's `service.replicas`).
        #[arg(long)]
        replicas: Option<u32>,
    },
    /// List services: replicas running and wanted, up to date, revision, autoscaling,
    /// owner, status (a rolling update, draining replicas).
    Ls,
    /// One service: its strategy, rolling update, autoscaling and last reading, then each
    /// replica's job, state (or draining), node, port, health, restarts and revision.
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
    /// Change a service: a new image, command or environment is a new revision, rolled out
    /// replica by replica; the strategy and autoscaling change at once.
    Update(Box<UpdateArgs>),
    /// The revisions kept (the current one marked, those rolled back with why) and the
    /// last rolling update.
    History {
        /// Service id.
        id: u64,
    },
    /// Go back to an earlier revision, rolled out as an update is.
    Rollback {
        /// Service id.
        id: u64,
        /// The revision (default: the one before the current one).
        #[arg(long, value_name = "N")]
        to: Option<u32>,
    },
    /// Its events, oldest first: created, scaled, each autoscaling decision with the
    /// values that caused it, updates, rollouts completed or rolled back, stopped.
    Events {
        /// Service id.
        id: u64,
    },
    /// Stop a service: its replicas are cancelled.
    Stop {
        /// Service id.
        id: u64,
    },
}

/// The autoscaling flags, which `--no-autoscale` excludes.
const AUTOSCALE_FLAGS: [&str; 8] = [
    "autoscale_min",
    "autoscale_max",
    "metric",
    "target",
    "metrics_path",
    "period",
    "scale_down_window",
    "scale_to_zero_after",
];

/// Options of `gantry service update`. The strategy and autoscaling flags change only what
/// they name, starting from the service's current settings.
#[derive(Debug, Default, clap::Args)]
pub struct UpdateArgs {
    /// Service id.
    pub id: u64,
    /// A new image (`''`: run on the host).
    #[arg(long, value_name = "IMG")]
    pub image: Option<String>,
    /// A new command, as one shell-quoted string (`--argv 'python serve.py --port 8000'`);
    /// or give it after `--`.
    #[arg(long, value_name = "CMD ARGS", conflicts_with = "command")]
    pub argv: Option<String>,
    /// Set an environment variable (repeatable).
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Remove an environment variable (repeatable).
    #[arg(long = "unset-env", value_name = "K")]
    pub unset_env: Vec<String>,
    /// Replicas of the new revision that may run beyond the wanted number during an update.
    #[arg(long, value_name = "N")]
    pub max_surge: Option<u32>,
    /// Replicas that may be unavailable during an update.
    #[arg(long, value_name = "N")]
    pub max_unavailable: Option<u32>,
    /// Seconds the new revision has to become healthy before it is rolled back by itself.
    #[arg(long, value_name = "SECONDS")]
    pub deadline: Option<u32>,
    /// Fewest replicas the autoscaler keeps (0 needs `--scale-to-zero-after`; above 0
    /// clears it unless given).
    #[arg(long, value_name = "N")]
    pub autoscale_min: Option<u32>,
    /// Most replicas the autoscaler makes.
    #[arg(long, value_name = "N")]
    pub autoscale_max: Option<u32>,
    /// The metric to scale on, in the replicas' Prometheus text
    /// (`vllm:num_requests_waiting`).
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,
    /// The metric's value wanted per replica.
    #[arg(long, value_name = "X", value_parser = positive_number)]
    pub target: Option<f64>,
    /// Where each replica serves its metrics (default `/metrics`).
    #[arg(long, value_name = "P")]
    pub metrics_path: Option<String>,
    /// Seconds between two readings (default 15).
    #[arg(long, value_name = "S")]
    pub period: Option<u32>,
    /// A scale-down takes the highest recommendation over this many seconds (default 300).
    #[arg(long, value_name = "S")]
    pub scale_down_window: Option<u32>,
    /// With `--autoscale-min 0`: seconds idle before the last replica stops.
    #[arg(long, value_name = "S")]
    pub scale_to_zero_after: Option<u32>,
    /// Remove the autoscaling settings (the replicas stay as many as now).
    #[arg(long, conflicts_with_all = AUTOSCALE_FLAGS)]
    pub no_autoscale: bool,
    /// The new command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn positive_number(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{text}` is not a number greater than 0")),
    }
}

/// Runs `gantry service`.
pub fn run(client: &Client, args: &ServiceArgs) -> anyhow::Result<()> {
    if let ServiceAction::Events { id } = args.action {
        let events = client.service_events(id)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&events)?);
            return Ok(());
        }
        for e in events.as_array().into_iter().flatten() {
            let at = e["at_ms"].as_u64().map(crate::policy_view::local_time);
            let message = e["message"].as_str().unwrap_or_default();
            // The stored message begins `service ID: `; the command named the service.
            let message = message.split_once(": ").map_or(message, |(_, m)| m);
            println!(
                "{}  {}",
                at.unwrap_or_default(),
                crate::terminal_text::escape_controls(message)
            );
        }
        return Ok(());
    }
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
        ServiceAction::Show { id } | ServiceAction::History { id } => vec![client.service(*id)?],
        ServiceAction::Scale { id, replicas } => vec![client.scale_service(*id, *replicas)?],
        ServiceAction::Update(a) => vec![update(client, a)?],
        ServiceAction::Rollback { id, to } => vec![client.rollback_service(*id, *to)?],
        ServiceAction::Stop { id } => vec![client.stop_service(*id)?],
        ServiceAction::Events { .. } => Vec::new(),
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
        ServiceAction::History { .. } => views.iter().flat_map(history_lines).collect(),
        _ => views.iter().flat_map(detail_lines).collect(),
    };
    lines.iter().for_each(|l| println!("{l}"));
    Ok(())
}

/// `gantry service update`: reads the service first when a strategy or autoscaling flag
/// changes part of its current settings.
fn update(client: &Client, a: &UpdateArgs) -> anyhow::Result<ServiceView> {
    let current = if rollout_given(a) || autoscale_given(a) {
        Some(client.service(a.id)?.service)
    } else {
        None
    };
    let request = update_request(a, current.as_ref())?;
    if request == UpdateRequest::default() {
        bail!(
            "nothing to change: give --image, --argv (or a command after --), --env, \
             --unset-env, --max-surge, --max-unavailable, --deadline, autoscaling flags or \
             --no-autoscale"
        );
    }
    Ok(client.update_service(a.id, &request)?)
}

fn rollout_given(a: &UpdateArgs) -> bool {
    a.max_surge.is_some() || a.max_unavailable.is_some() || a.deadline.is_some()
}

fn autoscale_given(a: &UpdateArgs) -> bool {
    a.autoscale_min.is_some()
        || a.autoscale_max.is_some()
        || a.metric.is_some()
        || a.target.is_some()
        || a.metrics_path.is_some()
        || a.period.is_some()
        || a.scale_down_window.is_some()
        || a.scale_to_zero_after.is_some()
}

/// The request `a` asks for; `current` (the service as it is) is needed when a strategy
/// or autoscaling flag is given.
pub fn update_request(
    a: &UpdateArgs,
    current: Option<&ServiceRecord>,
) -> anyhow::Result<UpdateRequest> {
    let argv = match &a.argv {
        Some(text) => Some(
            crate::sbatch::values::split_words(text).map_err(|e| anyhow::anyhow!("--argv: {e}"))?,
        ),
        None => (!a.command.is_empty()).then(|| a.command.clone()),
    };
    let rollout = if rollout_given(a) {
        let mut r = current.context("the service's current strategy")?.strategy;
        r.max_surge = a.max_surge.unwrap_or(r.max_surge);
        r.max_unavailable = a.max_unavailable.unwrap_or(r.max_unavailable);
        r.progress_deadline_s = a.deadline.unwrap_or(r.progress_deadline_s);
        Some(r)
    } else {
        None
    };
    let autoscale = if autoscale_given(a) {
        let current = current.context("the service's current autoscaling")?;
        Some(autoscale(a, current)?)
    } else {
        None
    };
    Ok(UpdateRequest {
        image: a.image.clone(),
        argv,
        env: env_changes(&a.env, &a.unset_env)?,
        rollout,
        autoscale,
        no_autoscale: a.no_autoscale,
    })
}

/// `--env K=V` as `K: V`, `--unset-env K` as `K: null`.
fn env_changes(
    set: &[String],
    unset: &[String],
) -> anyhow::Result<std::collections::BTreeMap<String, Option<String>>> {
    let mut env = std::collections::BTreeMap::new();
    for kv in set {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => env.insert(k.to_string(), Some(v.to_string())),
            _ => bail!("--env `{kv}` is not K=V"),
        };
    }
    for k in unset {
        if env.insert(k.clone(), None).is_some() {
            bail!("{k} is both set (--env) and removed (--unset-env)");
        }
    }
    Ok(env)
}

/// The service's autoscaling with the flags given applied; a service without one needs
/// the bounds, the metric and the target, the rest taking the API's defaults.
fn autoscale(a: &UpdateArgs, current: &ServiceRecord) -> anyhow::Result<AutoscaleSpec> {
    let mut spec = match &current.autoscale {
        Some(spec) => spec.clone(),
        None => {
            let (Some(min), Some(max), Some(metric), Some(target)) =
                (a.autoscale_min, a.autoscale_max, &a.metric, a.target)
            else {
                bail!(
                    "service {} has no autoscaling yet: give --autoscale-min, \
                     --autoscale-max, --metric and --target",
                    current.id
                );
            };
            let fields = serde_json::json!({
                "min_replicas": min, "max_replicas": max, "metric": metric, "target": target,
            });
            serde_json::from_value(fields).context("the autoscaling settings")?
        }
    };
    if let Some(n) = a.autoscale_min {
        spec.min_replicas = n;
        if n > 0 {
            spec.scale_to_zero_after_s = None;
        }
    }
    spec.max_replicas = a.autoscale_max.unwrap_or(spec.max_replicas);
    spec.metric = a.metric.clone().unwrap_or(spec.metric);
    spec.target = a.target.unwrap_or(spec.target);
    spec.path = a.metrics_path.clone().unwrap_or(spec.path);
    spec.period_s = a.period.unwrap_or(spec.period_s);
    spec.scale_down_window_s = a.scale_down_window.unwrap_or(spec.scale_down_window_s);
    if a.scale_to_zero_after.is_some() {
        spec.scale_to_zero_after_s = a.scale_to_zero_after;
    }
    Ok(spec)
}

/// The job spec in `file` (YAML for `.yaml`/`.yml`, or standard input not starting with
/// `{`; else JSON), every field as written.
pub fn read_spec(file: &Path) -> anyhow::Result<JobSpec> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let yaml = match file.extension().and_then(|e| e.to_str()) {
        Some(ext) => ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml"),
        None => file.as_os_str() == "-" && !text.trim_start().starts_with('{'),
    };
    let what = || format!("{} is not a job spec", file.display());
    if yaml {
        serde_yaml::from_str(&text).with_context(what)
    } else {
        serde_json::from_str(&text).with_context(what)
    }
}

#[cfg(test)]
mod tests;
