//! `gantry-agent`, i.e. `gantry agent --controller URL`: the node agent of multi-node mode. It discovers its
//! node, sets up isolation and an [`Executor`] like `gantry serve` does, re-attaches to the
//! tasks that survived its last run, serves the controller's calls (`server`), reports to it
//! on every heartbeat (`heartbeat`) and runs until SIGINT/SIGTERM, leaving its tasks running
//! (they are re-attached at the next start). Under systemd (`Type=notify`) it says `READY=1`
//! once it listens and `STOPPING=1` on SIGTERM (`gantry_http::sd_notify`).
//!
//! Owns: the command line of `gantry agent`, its start-up (configuration, token, node,
//! executor, address) and its run loop. Does not own the task table (`tasks`, `launch`,
//! `recover`), the routes (`server`), the reports (`heartbeat`) or the wire protocol
//! (`gantry_api::cluster`).
//!
//! Dependency direction: this crate uses `gantry-node` (the executor, the inventory, health
//! probes), `gantry-api` (the cluster protocol), `gantry-http` (the server it serves on),
//! `gantry-config` and `gantry-telemetry`; it knows nothing of the controller (the daemon,
//! `gantry-server`), which reaches it only over HTTP (`scripts/crate-rules`).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod gpu_health;
mod heartbeat;
mod launch;
mod recover;
mod server;
mod tasks;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_http;

use anyhow::{Context, bail};
use gantry_config::Config;
use gantry_node::executor::{Executor, Isolation};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasks::TaskTable;

/// Where the agent listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8421";

/// The sub-directory of the data directory that holds one directory per task run.
pub const TASKS_DIR: &str = "agent-tasks";

/// `gantry agent` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The controller's URL (the `gantry serve` API), e.g. http://10.0.0.1:8420; default
    /// `[agent] controller`.
    #[arg(long)]
    pub controller: Option<String>,
    /// TOML config file, the same format as `gantry serve`'s ([agent], [node], [execution],
    /// data_dir, kill_grace_s, [cluster] token or node_credential); `gantry agent join`
    /// writes one.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to serve the controller's calls on (port 0: any free port); default
    /// `[agent] listen`, else 127.0.0.1:8421.
    #[arg(long)]
    pub listen: Option<String>,
    /// The address the controller and other nodes reach this node at (required when
    /// listening on 0.0.0.0 or ::).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Override `data_dir` (task logs and exit records live in <data_dir>/agent-tasks).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Override `node.name` (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Override `node.gpus` (GPUs when there is no NVML driver).
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Do not ask NVML; use configured GPUs.
    #[arg(long)]
    pub no_nvml: bool,
}

/// Everything [`run`] needs: the checked configuration with the flags applied.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The configuration (`[node]`, `[execution]`, `data_dir`, `kill_grace_s`, `[cluster]`).
    pub config: Config,
    /// The controller's URL.
    pub controller: String,
    /// Where to listen.
    pub listen: String,
    /// The address to advertise instead of the listen address.
    pub advertise: Option<String>,
    /// CA certificate (PEM) to trust for an `https://` controller.
    pub ca_cert: Option<PathBuf>,
}

impl AgentOptions {
    /// Loads the config file named in `args`, applies the flags and checks the result.
    pub fn from_args(args: AgentArgs, ca_cert: Option<PathBuf>) -> anyhow::Result<Self> {
        let mut config = Config::load(args.config.as_deref())?;
        if let Some(d) = args.data_dir {
            config.data_dir = d;
        }
        if let Some(n) = args.name {
            config.node.name = n;
        }
        if let Some(g) = args.gpus {
            config.node.gpus = g;
        }
        if args.no_nvml {
            config.node.use_nvml = false;
        }
        config.check()?;
        let section = config.agent.clone();
        let Some(controller) = args
            .controller
            .or_else(|| Some(section.controller).filter(|c| !c.trim().is_empty()))
        else {
            bail!("no controller: pass --controller URL or set `[agent] controller` in --config");
        };
        let listen = args
            .listen
            .or_else(|| Some(section.listen).filter(|l| !l.is_empty()))
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let advertise = args
            .advertise
            .or_else(|| Some(section.advertise).filter(|a| !a.is_empty()));
        Ok(Self {
            config,
            controller,
            listen,
            advertise,
            ca_cert: ca_cert.or(section.ca_cert),
        })
    }
}

/// `gantry agent`: options, logging, a runtime, then [`run`].
pub fn main(args: AgentArgs, ca_cert: Option<PathBuf>) -> anyhow::Result<()> {
    let options = AgentOptions::from_args(args, ca_cert)?;
    let _telemetry = gantry_telemetry::init(&options.config.telemetry)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(options))
}

/// Runs the agent until SIGINT/SIGTERM (`Ok`) or until the controller refuses it (`Err`:
/// wrong token, another protocol, a node name already taken).
pub async fn run(options: AgentOptions) -> anyhow::Result<()> {
    let config = options.config;
    if config.cluster.node_credential.is_empty() && config.cluster.effective_token().is_empty() {
        bail!(
            "no credential: join the cluster (`gantry agent join`), or set `[cluster] token` in the config file or {} (the controller's token)",
            gantry_config::cluster::TOKEN_ENV
        );
    }
    let shim = gantry_node::executor::shim_executable(
        &std::env::current_exe()
            .context("cannot find the gantry executable (needed as the task shim)")?,
    );
    gantry_private_files::restrict_umask();
    let data_dir = gantry_node::trusted_dir::absolute_and_trusted(&config.data_dir)
        .context("refusing the data directory (data_dir)")?;
    gantry_private_files::dir_with_mode(&data_dir, gantry_private_files::TRAVERSE_ONLY)
        .with_context(|| format!("data_dir {} is not usable", data_dir.display()))?;
    let node_config = config.node.clone();
    let node =
        tokio::task::spawn_blocking(move || gantry_node::inventory::discover(&node_config)).await?;
    // The node's own credential: it speaks for this node's name and no other.
    let token = config.cluster.agent_credential(&node.name);
    let controller =
        heartbeat::Controller::new(&options.controller, &token, &node.name, options.ca_cert)?
            .with_shared_token(if config.cluster.node_credential.is_empty() {
                config.cluster.effective_token()
            } else {
                String::new()
            });
    let node_gpus: Vec<u32> = node.gpus.iter().map(|g| g.index).collect();
    let isolation = Isolation::setup(&config.execution, node_gpus.clone())?
        .with_mig_caps(gantry_node::executor::MigCaps::read(&node.gpus));
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let executor = Executor::with_isolation(shim, tx, isolation)
        .with_log_limit(config.limits.max_log_bytes())
        .with_scratch_limit(config.execution.work_dir_mib)
        .with_containers(gantry_node::container::Containers::detect(
            &config.containers,
            &config.data_dir,
        ));
    executor.warn_if_tasks_cannot_reach(&data_dir);
    let table = TaskTable::new(
        data_dir.join(TASKS_DIR),
        executor.clone(),
        node_gpus.into_iter().collect(),
        Duration::from_secs(config.kill_grace_s),
    )
    .with_context(|| format!("cannot use {}", data_dir.join(TASKS_DIR).display()))?;
    let table = Arc::new(table);
    let recovered = table.recover()?;
    executor.sweep_cgroups();
    tracing::info!(
        node = %node.name, gpus = node.gpus.len(), source = %node.gpu_source,
        adopted = recovered.adopted, ended = recovered.ended, "agent node"
    );

    let listener = tokio::net::TcpListener::bind(&options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let local = listener.local_addr()?;
    let addr = advertised(options.advertise.as_deref(), local)?;
    let tls = gantry_config::tls::ServerTls::load(&config.tls)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let agent_url = format!("{scheme}://{}:{}", url_host(&addr), local.port());
    if let Some(tls) = &tls {
        tracing::info!("TLS: {}", tls.summary());
    }
    println!("gantry agent {} listening on {scheme}://{local}", node.name);
    // Every path the agent keeps is absolute by now (as in the daemon's `serve`).
    std::env::set_current_dir("/").context("cannot change to /")?;
    std::io::stdout().flush()?;
    tracing::info!(%agent_url, controller = %options.controller, "agent serving");

    let events_table = table.clone();
    // An end is reported at once (an early heartbeat), not at the next interval: the
    // controller frees the task's GPUs only when it hears of it.
    let ended = Arc::new(tokio::sync::Notify::new());
    let ended_signal = ended.clone();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            events_table.task_ended(&event);
            ended_signal.notify_one();
        }
    });
    let gpu_health = Arc::new(Mutex::new(gpu_health::GpuHealthReport::default()));
    let terms = Arc::new(gantry_api::cluster_term::Highest::kept_in(
        data_dir.join("agent-term"),
    ));
    gpu_health::start_watch(&node, &config.node, gpu_health.clone(), executor.clone());
    let beats = heartbeat::Beats {
        controller,
        node,
        agent_url,
        addr,
        gpu_health,
        table: table.clone(),
        ended,
        terms: terms.clone(),
    };
    let app = server::router(table, &token, terms);
    // Connection limits, timeouts and Host rules (the advertised address is a name of ours).
    let options = gantry_http::ServeOptions {
        settings: config.http.clone(),
        extra_hosts: vec![url_host(&beats.addr)],
        tls: tls.map(|t| t.config()),
    };
    let stop = async {
        gantry_http::shutdown().await;
        gantry_http::sd_notify::stopping();
    };
    let serving = gantry_http::serve(listener, app, options, stop);
    // Ready once listening (systemd's start ends here), not after the first heartbeat: a
    // controller that is down would otherwise fail the unit's start, where the agent waits
    // for it and retries.
    gantry_http::sd_notify::ready(&format!(
        "serving on {scheme}://{local}; controller {}",
        beats.controller.url()
    ));
    tokio::select! {
        served = serving => {
            served?;
            tracing::info!("gantry agent stopped; running tasks keep running and are re-attached at the next start");
            Ok(())
        }
        refused = beats.run() => refused,
    }
}

/// The node's address for the controller and other nodes: `--advertise`, else the address
/// the agent listens on, which must then be a specific one.
fn advertised(advertise: Option<&str>, local: SocketAddr) -> anyhow::Result<String> {
    match advertise.map(str::trim).filter(|a| !a.is_empty()) {
        Some(a) => Ok(a.trim_start_matches('[').trim_end_matches(']').to_string()),
        None if local.ip().is_unspecified() => bail!(
            "the agent listens on {local}, which other nodes cannot use as its address: pass --advertise ADDR (this node's address as the controller reaches it)"
        ),
        None => Ok(local.ip().to_string()),
    }
}

/// `addr` as the host part of a URL (an IPv6 address in brackets).
fn url_host(addr: &str) -> String {
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => addr.to_string(),
    }
}
