//! The `gantry` binary: `gantry serve` runs the daemon; the other subcommands are a
//! client of its HTTP API (sending the token from `--token-file`, `GANTRY_TOKEN` or
//! `~/.config/gantry/token`). `gantry task-shim` is internal (it supervises one task).

use anyhow::Context;
use clap::{Parser, Subcommand};
use gantry_cli::auth_cli::{self, TokenCreateArgs};
use gantry_cli::cli::{self, Client};
use gantry_cli::policy_view;
use gantry_cli::submit_cli::{self, SubmitArgs};
use gantry_config::Config;
use serde_json::json;
use std::path::PathBuf;

mod agent_join;
mod plugin_project;

#[derive(Parser, Debug)]
#[command(
    name = "gantry",
    version,
    about = "A GPU-cluster scheduler with WebAssembly policy plugins"
)]
struct Cli {
    /// The daemon's address (for client commands): `unix:PATH` for its Unix socket (the
    /// kernel tells the daemon who you are; no token needed), or `http(s)://HOST:PORT`, or
    /// several such URLs separated by commas (the controllers of one cluster on etcd: the
    /// one that leads is used). Default: `unix:gantry-data/gantry.sock` when that socket exists here, else
    /// `http://127.0.0.1:8420`.
    #[arg(long, global = true, env = "GANTRY_SERVER")]
    server: Option<String>,
    /// File holding the API token (default: `GANTRY_TOKEN`, then ~/.config/gantry/token).
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// PEM file of the CA (or self-signed) certificate to trust for an https:// server,
    /// in place of the public roots.
    #[arg(long, global = true, env = "GANTRY_CA_CERT")]
    ca_cert: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the daemon (controller and local node).
    Serve {
        /// TOML config file (defaults for everything when absent).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override `listen`.
        #[arg(long)]
        listen: Option<String>,
        /// Override `data_dir`.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Override `node.gpus` (GPUs when there is no NVML driver).
        #[arg(long)]
        gpus: Option<u32>,
        /// Do not ask NVML; use configured GPUs.
        #[arg(long)]
        no_nvml: bool,
    },
    /// Make a controller of this machine: a cluster CA, certificates, a configuration and a
    /// join token; prints the command to run on each node (docs/admin/install.md).
    Init(gantry_enrol::init::InitArgs),
    /// Run a node agent of multi-node mode: it joins the controller at --controller and
    /// runs the tasks the controller places on this node; `gantry agent join` makes a node.
    Agent(AgentCommand),
    /// Submit a job: gantry submit --gpus 2 --time 1h -- python train.py, or a batch
    /// script with #SBATCH directives: gantry submit job.sh
    Submit(Box<SubmitArgs>),
    /// Run an interactive job: wait for it to start, stream its output, forward Ctrl-C,
    /// exit with its exit code: gantry run --gpus 1 --time 1h -- python
    Run(gantry_cli::run_cli::RunArgs),
    /// List jobs, newest first, from memory and history (`--all` for every page).
    Jobs(gantry_cli::history_cli::JobsArgs),
    /// Administration: `gantry admin gc` deletes what retention no longer keeps, now.
    Admin {
        #[command(subcommand)]
        action: AdminAction,
    },
    /// Show one job as scontrol show job does (state, reason, times, allocation, exit code).
    Job {
        id: u64,
        /// The record as JSON (the API's), for scripts.
        #[arg(long)]
        json: bool,
        /// When it would start as it is and with other shapes (a pending job).
        #[command(flatten)]
        what_if: gantry_cli::what_if_cli::WhatIfArgs,
    },
    /// Cancel jobs, as scancel: gantry cancel 8 9 12-20, an array (64) or a member (64_3),
    /// --user alice, --state pending
    Cancel(gantry_cli::cancel_cli::CancelArgs),
    /// Hold pending jobs, as scontrol hold: they do not start until released.
    Hold {
        /// Job ids and ranges (`12-20`).
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Release held jobs, as scontrol release.
    Release {
        /// Job ids and ranges (`12-20`).
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Change a pending job, as scontrol update: gantry update 8 --time 2h --dependency afterok:5
    Update {
        id: u64,
        /// New time limit (90s, 15m, 4h, 2d, or SLURM's 1:30:00, 1-12, UNLIMITED).
        #[arg(short = 't', long)]
        time: Option<String>,
        /// New dependencies, replacing the old ones (afterok:12:13,afterany:14; `none` clears).
        #[arg(short = 'd', long)]
        dependency: Option<String>,
    },
    /// Send a signal to a running job's tasks, as scancel --signal: gantry signal 8 USR1
    Signal {
        id: u64,
        /// INT, TERM, USR1, USR2, HUP, QUIT, CONT, URG, WINCH or ALRM (with or without SIG).
        signal: String,
    },
    /// Print a task's log (`-f`: follow it until the job ends, as `tail -f`).
    Logs {
        id: u64,
        #[arg(long, default_value_t = 0)]
        task: usize,
        /// Keep printing what the task writes until the job has ended.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Who the daemon takes you for (user, role, and how: socket, token or none).
    Whoami,
    /// List nodes, one line each as sinfo -N (`-l`: every GPU and who holds it).
    Nodes {
        /// Every GPU with its holders, health and MIG devices (the long form).
        #[arg(short = 'l', long)]
        long: bool,
        /// The nodes as JSON (the API's view), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// The container images in the node's cache: digest, size, last use, references.
    Images {
        /// The API's answer as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Replicated services (like Deployments): create, ls, show, scale, update, history,
    /// rollback, events, stop.
    Service(gantry_cli::service_cli::ServiceArgs),
    /// Usage records of ended tasks and GPU/CPU-hour totals per user and account (like sacct).
    Accounting(gantry_cli::accounting_cli::AccountingArgs),
    /// Drain a node (operator): running jobs continue, nothing new starts there.
    Drain {
        /// Node name (as in `gantry nodes`).
        node: String,
        /// Why (shown with the node and in waiting jobs' reasons).
        #[arg(long)]
        reason: String,
    },
    /// Resume a drained node (operator).
    Resume {
        /// Node name.
        node: String,
    },
    /// Make links named sbatch, squeue, scancel, sacct, sinfo, srun, salloc and scontrol to
    /// this binary in DIR, which then speaks those SLURM commands (nothing already in DIR
    /// is replaced); put DIR first on PATH. See docs/user/slurm-clients.md.
    SlurmLinks {
        /// Where to make the links (e.g. /usr/local/bin, or ~/.local/gantry-slurm/bin).
        dir: PathBuf,
    },
    /// Remove a node that is down (operator), e.g. a machine taken out of the cluster.
    RemoveNode {
        /// Node name.
        node: String,
    },
    /// Manage plugins.
    Plugin {
        #[command(subcommand)]
        action: PluginAction,
        /// Print the daemon's answer as JSON (for scripts).
        #[arg(long, global = true)]
        json: bool,
    },
    /// Manage the policy pipeline.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
        /// Print the daemon's answer as JSON (for scripts).
        #[arg(long, global = true)]
        json: bool,
    },
    /// Replay a workload on a simulated cluster through real pipelines, on a virtual
    /// clock (no daemon needed).
    Simulate {
        #[command(subcommand)]
        mode: gantry_sim::command::SimulateCommand,
    },
    /// What-if: replay recorded cycles with a candidate pipeline and list where it
    /// would have decided differently.
    Replay {
        /// How far back (90s, 15m, 1h, 2d).
        #[arg(long, default_value = "1h")]
        since: String,
        /// Candidate pipeline file (JSON or TOML).
        #[arg(long)]
        pipeline: PathBuf,
        /// Print the daemon's answer as JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// The controller's store: move it to the replicated backends.
    Store {
        #[command(subcommand)]
        action: StoreAction,
    },
    /// Internal: supervise one task (started by the daemon).
    #[command(hide = true, name = "task-shim")]
    TaskShim,
}

#[derive(Subcommand, Debug)]
enum AdminAction {
    /// Delete the job records, logs, events and accounting records older than the
    /// `[retention]` settings now (admin), printing progress.
    Gc,
    /// Rewrite the store into fresh files so they shrink after a large collection (the
    /// daemon must be stopped; run on its machine, as root).
    Compact {
        /// The daemon's data directory.
        #[arg(long, default_value = "gantry-data")]
        data_dir: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum StoreAction {
    /// Copy a stopped controller's state (sled) and history (SQLite) to etcd and
    /// PostgreSQL, for a cluster of several controllers; says what it copied.
    Migrate {
        /// The stopped controller's data directory.
        #[arg(long, default_value = "gantry-data")]
        from: PathBuf,
        /// `etcd:http://HOST:2379[,http://HOST2:2379...],postgres:postgres://USER@HOST/DB`.
        #[arg(long)]
        to: String,
        /// Key prefix in etcd (`[store] prefix`).
        #[arg(long, default_value = "/gantry/")]
        prefix: String,
        /// A file only you may read (0600) holding the PostgreSQL user's password (else
        /// `GANTRY_HISTORY_PASSWORD`); a password in `--to` is refused.
        #[arg(long)]
        history_password_file: Option<PathBuf>,
        /// An etcd user to log in as (`[store] username`).
        #[arg(long)]
        etcd_user: Option<String>,
        /// A 0600 file holding that user's password (else `GANTRY_ETCD_PASSWORD`).
        #[arg(long)]
        etcd_password_file: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum PluginAction {
    /// Make a new plugin project: a manifest (gantry-plugin.toml), one priority stage
    /// (fewer GPUs first) and a scenario that tests it.
    New {
        /// The plugin's name (a-z, 0-9, -).
        name: String,
        /// The project's language.
        #[arg(long, value_enum)]
        lang: plugin_project::Lang,
        /// Where to make it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build the project in DIR into DIR/NAME.wasm with the checkout's toolchains
    /// (GANTRY_HOME), then run `gantry plugin test` on it with DIR/scenarios.
    Build {
        /// The project (default: the current directory).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Build only.
        #[arg(long)]
        no_test: bool,
    },
    /// Upload a component (.wasm).
    Add { file: PathBuf },
    /// List registered plugins.
    List,
    /// Conformance test of a component: metadata, contract version, WASI imports,
    /// every stage on built-in scenarios and on your own (exit status 1 on failure).
    Test {
        /// The component (.wasm).
        file: PathBuf,
        /// A directory of scenario files (*.json: {"snapshot": ..., "expect": ...}).
        #[arg(long)]
        scenarios: Option<PathBuf>,
        /// JSON config passed to `configure`.
        #[arg(long, default_value = "{}")]
        config: String,
        /// Deadline per call in ms.
        #[arg(long, default_value_t = 100)]
        deadline_ms: u64,
        /// Memory cap in MiB.
        #[arg(long, default_value_t = 256)]
        memory_mib: u64,
    },
}

#[derive(Subcommand, Debug)]
enum TokenAction {
    /// Make a random token: prints it once on stdout, and its `[[auth.tokens]]` entry
    /// (holding only its sha256) on stderr or appended to `--config`.
    Create(TokenCreateArgs),
    /// Make a join token for nodes (admin): prints the `gantry agent join` command.
    Join(gantry_cli::join_token_cli::TokenJoinArgs),
    /// List join tokens (admin).
    List,
    /// Revoke a join token by its id, gjt_<id> (admin).
    Revoke {
        /// The token's id.
        id: String,
    },
}

/// `gantry agent`: run the agent, or `gantry agent join`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
struct AgentCommand {
    #[command(subcommand)]
    action: Option<AgentAction>,
    #[command(flatten)]
    run: gantry_agent::AgentArgs,
}

#[derive(Subcommand, Debug)]
enum AgentAction {
    /// Join this machine to a cluster with a join token, write its agent configuration
    /// (default /etc/gantry/agent.toml) and start the agent.
    Join(gantry_enrol::join::JoinArgs),
}

#[derive(Subcommand, Debug)]
enum PolicyAction {
    /// Show the active pipeline.
    Show,
    /// Replace the pipeline with the one in a JSON or TOML file (hot swap).
    Set { file: PathBuf },
    /// Return to the previous pipeline.
    Rollback,
    /// List pipeline versions.
    History,
    /// Run a pipeline file beside the live one without applying it (`--clear` stops it).
    Shadow {
        /// Pipeline file (JSON or TOML); omit to show the current shadow's differences.
        file: Option<PathBuf>,
        /// Stop the shadow.
        #[arg(long)]
        clear: bool,
    },
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(gantry_node::executor::SHIM_SUBCOMMAND) {
        std::process::exit(gantry_node::executor::run_shim(&args[2..]));
    }
    // Started as `sbatch`, `squeue`, ... (the links of `gantry slurm-links`).
    if let Some(cmd) = args
        .first()
        .and_then(|a0| gantry_cli::slurm::SlurmCommand::from_argv0(a0))
    {
        quiet_on_broken_pipe();
        std::process::exit(gantry_cli::slurm::main(cmd, &args[1..]));
    }
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// Caps glibc's malloc at two arenas, unless the operator set `MALLOC_ARENA_MAX`. glibc
/// gives threads that contend for the allocator arenas of their own (up to eight per core)
/// and seldom returns their free space, so a daemon whose runtime threads handle
/// every request grew by fragmentation as jobs went through: 113 MiB after 10,000 jobs
/// with the default, 98 MiB with two arenas (`docs/benchmarks/history.md`).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; it is called before the
        // runtime starts its threads.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// Whether a command talks to the daemon (and so needs its token).
fn is_client(command: &Command) -> bool {
    !matches!(
        command,
        Command::Serve { .. }
            | Command::Agent(_)
            | Command::Init(_)
            | Command::Simulate { .. }
            | Command::Token {
                action: TokenAction::Create(_)
            }
            | Command::TaskShim
            | Command::SlurmLinks { .. }
            | Command::Store { .. }
            | Command::Admin {
                action: AdminAction::Compact { .. }
            }
            | Command::Plugin {
                action: PluginAction::Test { .. }
                    | PluginAction::New { .. }
                    | PluginAction::Build { .. },
                ..
            }
    )
}

/// A client command ends quietly when its reader goes away (`gantry jobs | head -1`), as
/// other Unix tools do, instead of panicking on the broken pipe. The daemon keeps ignoring
/// SIGPIPE (a client that hangs up must not kill it).
fn quiet_on_broken_pipe() {
    // SAFETY: restoring a signal's default disposition has no preconditions; it is done
    // before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if is_client(&cli.command) {
        quiet_on_broken_pipe();
    }
    let token = if is_client(&cli.command) {
        auth_cli::read_token(cli.token_file.as_deref())?
    } else {
        None
    };
    let ca_cert = cli.ca_cert.as_deref().filter(|_| is_client(&cli.command));
    let server = cli
        .server
        .clone()
        .unwrap_or_else(gantry_cli::cli::default_server);
    let client = cli::client_for(&server, ca_cert)?.with_token(token);
    match cli.command {
        Command::Serve {
            config,
            listen,
            data_dir,
            gpus,
            no_nvml,
        } => {
            let mut cfg = Config::load(config.as_deref())?;
            // The controller's job steps become spans when traces are exported.
            gantry_server::job_trace_sink::install();
            let _telemetry = gantry_telemetry::init(&cfg.telemetry)?;
            if let Some(l) = listen {
                cfg.listen = l;
            }
            if let Some(d) = data_dir {
                cfg.data_dir = d;
            }
            if let Some(g) = gpus {
                cfg.node.gpus = g;
            }
            if no_nvml {
                cfg.node.use_nvml = false;
            }
            cfg.check()?;
            limit_malloc_arenas();
            gantry_node::process_hygiene::mark_inherited_fds_cloexec()
                .context("cannot mark inherited file descriptors close-on-exec")?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            rt.block_on(gantry_server::serve::serve(cfg))
        }
        Command::Init(a) => gantry_enrol::init::main(a),
        Command::Agent(AgentCommand { action, run }) => {
            let run = match action {
                None => run,
                Some(AgentAction::Join(join)) => match agent_join::join_then(&join)? {
                    Some(args) => args,
                    None => return Ok(()),
                },
            };
            limit_malloc_arenas();
            gantry_node::process_hygiene::mark_inherited_fds_cloexec()
                .context("cannot mark inherited file descriptors close-on-exec")?;
            gantry_agent::main(run, cli.ca_cert)
        }
        Command::Submit(a) => submit_cli::run(&client, &a),
        Command::Run(a) => {
            let code = gantry_cli::run_cli::run(std::sync::Arc::new(client), &a)?;
            std::process::exit(code);
        }
        Command::Jobs(a) => gantry_cli::history_cli::jobs(&client, &a),
        Command::Store {
            action:
                StoreAction::Migrate {
                    from,
                    to,
                    prefix,
                    history_password_file,
                    etcd_user,
                    etcd_password_file,
                },
        } => gantry_cli::store_cli::migrate(
            &from,
            &to,
            &prefix,
            &gantry_cli::store_cli::Secrets {
                history_password_file,
                etcd_user,
                etcd_password_file,
            },
        ),
        Command::Admin { action } => match action {
            AdminAction::Gc => gantry_cli::history_cli::gc(&client),
            AdminAction::Compact { data_dir } => gantry_cli::history_cli::compact(&data_dir),
        },
        Command::Job { id, what_if, .. } if what_if.what_if => {
            gantry_cli::what_if_cli::job_variants(&client, id, &what_if)
        }
        Command::Job { id, json, .. } => {
            let job = client.job(id)?;
            if json {
                cli::print_json(&serde_json::to_value(&job)?);
            } else {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                gantry_cli::show_job::render(&job, now)
                    .iter()
                    .for_each(|l| println!("{l}"));
            }
            if let Some(line) = cli::service_line(&job) {
                eprintln!("{line}"); // stderr: with --json, stdout stays JSON
            }
            Ok(())
        }
        Command::Cancel(a) => gantry_cli::cancel_cli::run(&client, &a),
        Command::Hold { ids } => gantry_cli::control_cli::hold_all(&client, &ids),
        Command::Release { ids } => gantry_cli::control_cli::release_all(&client, &ids),
        Command::Update {
            id,
            time,
            dependency,
        } => gantry_cli::control_cli::update(&client, id, time.as_deref(), dependency.as_deref()),
        Command::Signal { id, signal } => gantry_cli::control_cli::signal(&client, id, &signal),
        Command::Logs { id, task, follow } => {
            if follow {
                return gantry_cli::cli::follow_log(&client, id, task);
            }
            gantry_cli::cli::print_job_text(&client.logs(id, task)?);
            Ok(())
        }
        Command::Accounting(a) => gantry_cli::accounting_cli::run(&client, &a),
        Command::Whoami => gantry_cli::cli::whoami(&client),
        Command::Nodes { long, json } => {
            let nodes = client.nodes()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&nodes)?);
            } else if long {
                cli::print_nodes(&nodes);
            } else {
                gantry_cli::sinfo_view::render(&nodes)
                    .iter()
                    .for_each(|l| println!("{l}"));
            }
            // With several controllers, which one leads (to stdout after the table; not with --json).
            if !json
                && let Ok(health) = client.health()
                && let Some(line) = gantry_cli::sinfo_view::leader_line(&health)
            {
                println!("{line}");
            }
            Ok(())
        }
        Command::Service(a) => gantry_cli::service_cli::run(&client, &a),
        Command::Images { json } => {
            let answer = client.images()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
            } else {
                gantry_cli::images_view::render(&answer, gantry_cli::images_view::now_ms())
                    .iter()
                    .for_each(|l| println!("{l}"));
            }
            Ok(())
        }
        Command::Drain { node, reason } => {
            cli::print_nodes(&[client.drain(&node, &reason)?]);
            Ok(())
        }
        Command::SlurmLinks { dir } => gantry_cli::slurm::links::run(&dir),
        Command::RemoveNode { node } => {
            client.remove_node(&node)?;
            println!("node {node} removed");
            Ok(())
        }
        Command::Resume { node } => {
            cli::print_nodes(&[client.resume(&node)?]);
            Ok(())
        }
        Command::Plugin {
            action: PluginAction::Add { file },
            ..
        } => {
            let info = client.upload_plugin(&cli::read_file(&file)?)?;
            // Each as JSON (names in quotes), as this line always showed them.
            println!(
                "uploaded {} {} (sha256 {}), stages {}",
                serde_json::to_string(&info.metadata.name)?,
                serde_json::to_string(&info.metadata.version)?,
                serde_json::to_string(&info.sha256)?,
                serde_json::to_string(&info.metadata.stages)?
            );
            Ok(())
        }
        Command::Plugin {
            action:
                PluginAction::Test {
                    file,
                    scenarios,
                    config,
                    deadline_ms,
                    memory_mib,
                },
            ..
        } => plugin_test(file, scenarios, config, deadline_ms, memory_mib),
        Command::Plugin {
            action: PluginAction::New { name, lang, dir },
            ..
        } => {
            let dir = plugin_project::new(&name, lang, dir)?;
            println!(
                "made {} ({lang:?}): build it with gantry plugin build {}",
                dir.display(),
                dir.display()
            );
            Ok(())
        }
        Command::Plugin {
            action: PluginAction::Build { dir, no_test },
            ..
        } => {
            let wasm = plugin_project::build(&dir)?;
            let deadline_ms = plugin_project::manifest(&dir)?.deadline_ms.unwrap_or(100);
            println!(
                "built {} ({} bytes)",
                wasm.display(),
                std::fs::metadata(&wasm)?.len()
            );
            if no_test {
                return Ok(());
            }
            let scenarios = dir.join("scenarios");
            plugin_test(
                wasm,
                scenarios.is_dir().then_some(scenarios),
                "{}".into(),
                deadline_ms,
                256,
            )
        }
        Command::Plugin {
            action: PluginAction::List,
            json,
        } => {
            show(json, &client.plugins()?, policy_view::render_plugins);
            Ok(())
        }
        Command::Policy { action, json } => policy(&client, action, json),
        Command::Simulate { mode } => gantry_sim::command::run(mode),
        Command::Replay {
            since,
            pipeline,
            json,
        } => {
            let body = json!({
                "pipeline": cli::read_pipeline(&pipeline)?,
                "since_s": cli::parse_duration_s(&since)?,
            });
            show(json, &client.replay(&body)?, policy_view::render_replay);
            Ok(())
        }
        Command::Token { action } => match action {
            TokenAction::Create(a) => auth_cli::create(&a),
            TokenAction::Join(a) => gantry_cli::join_token_cli::join(&client, &a),
            TokenAction::List => gantry_cli::join_token_cli::list(&client),
            TokenAction::Revoke { id } => gantry_cli::join_token_cli::revoke(&client, &id),
        },
        Command::TaskShim => anyhow::bail!("task-shim is internal"),
    }
}

fn plugin_test(
    file: PathBuf,
    scenarios: Option<PathBuf>,
    config: String,
    deadline_ms: u64,
    memory_mib: u64,
) -> anyhow::Result<()> {
    let opts = gantry_policy::conformance::Options {
        plugin: file.clone(),
        scenarios,
        config,
        limits: gantry_plugin_runtime::Limits {
            deadline_ms,
            memory_mib,
        },
    };
    println!("gantry plugin test {}", file.display());
    let report = gantry_policy::conformance::run(&opts)?;
    report.print();
    if report.failed() > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Prints `v` as JSON with `json`, else as `render` lays it out.
fn show(json: bool, v: &serde_json::Value, render: fn(&serde_json::Value) -> Vec<String>) {
    if json {
        cli::print_json(v);
    } else {
        for line in render(v) {
            println!("{line}");
        }
    }
}

fn policy(client: &Client, action: PolicyAction, json: bool) -> anyhow::Result<()> {
    match action {
        PolicyAction::Show => show(json, &client.policy()?, policy_view::render_policy),
        PolicyAction::Set { file } => {
            let v = client.set_policy(&cli::read_pipeline(&file)?)?;
            show(json, &v, policy_view::render_policy);
        }
        PolicyAction::Shadow { clear: true, .. } => {
            let v = client.clear_shadow()?;
            show(json, &v, |_| vec!["shadow pipeline stopped".into()]);
        }
        PolicyAction::Shadow {
            file: Some(file), ..
        } => {
            let v = client.set_shadow(&cli::read_pipeline(&file)?)?;
            show(json, &v, policy_view::render_shadow);
        }
        PolicyAction::Shadow { file: None, .. } => {
            let v = client.shadow_diff()?;
            show(json, &v, policy_view::render_shadow);
        }
        PolicyAction::Rollback => {
            let v = client.rollback_policy()?;
            show(json, &v, policy_view::render_policy);
        }
        PolicyAction::History => {
            show(json, &client.policy_history()?, policy_view::render_history);
        }
    }
    Ok(())
}
