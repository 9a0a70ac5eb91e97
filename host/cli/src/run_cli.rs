//! `gantry run [--gpus N] [--time 4h] -- CMD`: an interactive job, like `srun --pty` or a Ray
//! task at a terminal. It submits the job as `interactive`, waits until it starts (showing why
//! it waits), streams its output to this terminal, sends this client's stdin to it (with a
//! terminal of its own when stdin is one, `run_input`), and exits with the job's exit code.
//! While it waits, or without a terminal, the first Ctrl-C goes to the job as SIGINT (a second
//! one cancels it); with a terminal, Ctrl-C is a key the job's terminal turns into SIGINT.
//! When this client goes away, the daemon cancels the job.
//!
//! Owns: the client side of `/v1/jobs/{id}/attach` and `/signal`. Does not own the stream's
//! format (`api::attach`) nor the input (`run_input`).

use crate::cli::Client;
use crate::run_input::{self, InputMode};
use anyhow::{Context, bail};
use gantry_api::views::AttachFrame;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Options of `gantry run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Whole GPUs per task.
    #[arg(long, default_value_t = 0)]
    pub gpus: u32,
    /// A fraction of one GPU per task, in milli-GPU (e.g. 500).
    #[arg(long, default_value_t = 0)]
    pub gpu_milli: u32,
    /// Tasks (ranks) of the job.
    #[arg(long, default_value_t = 1)]
    pub tasks: u32,
    /// CPU per task in milli-cores.
    #[arg(long, default_value_t = 1000)]
    pub cpu_milli: u32,
    /// Memory per task in MiB.
    #[arg(long, default_value_t = 1024)]
    pub mem_mib: u64,
    /// Time limit, as submit reads it: 90s, 15m, 4h, or SLURM's forms (a bare number is minutes,
    /// 1:00:00, 1-12); the queue may cap interactive jobs.
    #[arg(short = 't', long)]
    pub time: Option<String>,
    /// Queue.
    #[arg(long, default_value = "default")]
    pub queue: String,
    /// Account.
    #[arg(long, default_value = "")]
    pub account: String,
    /// Job name (default: the command).
    #[arg(long, default_value = "")]
    pub name: String,
    /// Environment variable K=V (repeatable).
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// Do not send this client's stdin (the job reads /dev/null), as `srun --input=none`.
    #[arg(long)]
    pub no_stdin: bool,
    /// No terminal for the job even when stdin is one (stdin is sent as bytes).
    #[arg(long)]
    pub no_pty: bool,
    /// Run in this container image (as `gantry submit --image`); the working directory is
    /// the image's.
    #[arg(long, visible_alias = "container-image")]
    pub image: Option<String>,
    /// A host path to see inside the image, SRC[:DST][:ro] (repeatable).
    #[arg(long = "mount", visible_alias = "container-mounts")]
    pub mounts: Vec<String>,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The job spec of `gantry run`.
pub fn run_body(a: &RunArgs, with_token: bool) -> anyhow::Result<Value> {
    let env = crate::cli::env_vars(&a.env)?;
    let user = if with_token {
        String::new()
    } else {
        std::env::var("USER").unwrap_or_default()
    };
    let mut mounts = Vec::new();
    for m in &a.mounts {
        mounts.extend(
            gantry_api::model::ContainerMount::parse_list(m)
                .map_err(|e| anyhow::anyhow!("--mount: {e}"))?,
        );
    }
    // In an image the host's directory means nothing: the image's working directory.
    let workdir = match &a.image {
        Some(_) => None,
        None => std::env::current_dir()
            .ok()
            .map(|d| d.to_string_lossy().into_owned()),
    };
    Ok(json!({
        "image": a.image,
        "mounts": mounts,
        "name": if a.name.is_empty() { a.command.first().cloned().unwrap_or_default() } else { a.name.clone() },
        "kind": "interactive",
        "argv": a.command,
        "env": env,
        "workdir": workdir,
        "tasks": [{"count": a.tasks, "gpus": a.gpus, "gpu_milli": a.gpu_milli,
                   "cpu_milli": a.cpu_milli, "memory_mib": a.mem_mib}],
        "time_limit_s": a.time.as_deref().map(crate::submit_cli::parse_time_flag).transpose()?.unwrap_or(0),
        "user": user,
        "account": a.account,
        "queue": a.queue,
    }))
}

/// Runs `gantry run`; returns the process exit code.
pub fn run(client: Arc<Client>, a: &RunArgs) -> anyhow::Result<i32> {
    let mode = InputMode::choose(a.no_stdin, a.no_pty);
    let mut body = run_body(a, client.has_token())?;
    mode.add_to(&mut body);
    let id = client.submit(&body)?.job.id;
    eprintln!("gantry: job {id} submitted");
    gantry_node::sys::count_interrupts();
    let tty = matches!(mode, InputMode::Tty(..));
    if tty {
        gantry_node::terminal::count_window_changes();
    }
    if mode != InputMode::None {
        let client = client.clone();
        std::thread::spawn(move || run_input::pump_stdin(&client, id, mode));
    }
    let done = Arc::new(AtomicBool::new(false));
    let forwarder = {
        let (client, done) = (client.clone(), done.clone());
        std::thread::spawn(move || forward_interrupts(&client, id, tty, &done))
    };
    let result = follow(&client, id, tty);
    done.store(true, Ordering::SeqCst);
    let _ = forwarder.join();
    result
}

/// Sends the job SIGINT on the first Ctrl-C (or cancels it while it waits), cancels it on
/// the second; with a terminal, also sends the terminal's new size when it changes.
fn forward_interrupts(client: &Client, id: u64, tty: bool, done: &AtomicBool) {
    let mut handled = 0;
    let mut resized = 0;
    while !done.load(Ordering::SeqCst) {
        if tty {
            resized = run_input::follow_resize(client, id, resized);
        }
        let seen = gantry_node::sys::interrupts();
        if seen > handled {
            handled = seen;
            let signalled = handled == 1 && client.signal(id, "INT").is_ok();
            if signalled {
                eprintln!("\ngantry: sent SIGINT to job {id} (Ctrl-C again cancels it)");
            } else {
                eprintln!("\ngantry: cancelling job {id}");
                if let Err(e) = client.cancel(id) {
                    eprintln!("gantry: {e:#}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Streams the job until its last frame; returns its exit code.
fn follow(client: &Client, id: u64, tty: bool) -> anyhow::Result<i32> {
    let reader = BufReader::new(client.attach(id)?);
    let mut stdout = std::io::stdout();
    let mut last_reason = String::new();
    // This terminal, raw while the job's terminal is in use; restored when this returns.
    let mut raw = None;
    for line in reader.lines() {
        let line = line.context("the stream from the daemon broke")?;
        let frame: AttachFrame = serde_json::from_str(&line)
            .with_context(|| format!("unexpected line from the daemon: {line}"))?;
        if let Some(out) = &frame.out {
            stdout.write_all(out.as_bytes())?;
            stdout.flush()?;
            continue;
        }
        match frame.state.as_deref() {
            Some("pending") => {
                let reason = frame.reason.unwrap_or_else(|| "waiting".into());
                if reason != last_reason {
                    eprintln!("gantry: job {id} waits: {reason}");
                    last_reason = reason;
                }
            }
            Some("running") => {
                let node = frame.node.as_deref().unwrap_or("?");
                eprintln!("gantry: job {id} running on {node}");
                if tty && raw.is_none() {
                    raw = Some(
                        gantry_node::terminal::RawMode::enter(0)
                            .context("cannot put this terminal in raw mode")?,
                    );
                }
            }
            Some(state) => {
                drop(raw.take());
                let code = frame.exit_code.unwrap_or(1);
                if state != "succeeded" {
                    let why = frame.reason.as_deref().unwrap_or(state);
                    eprintln!("gantry: job {id} {state}: {why}");
                }
                return Ok(exit_status(state, code));
            }
            None => {}
        }
    }
    bail!("the daemon closed the stream before job {id} ended")
}

/// The client's exit code: the job's (shell style, 0..=255), 1 if it ended without one.
fn exit_status(state: &str, code: i64) -> i32 {
    match (state, code) {
        ("succeeded", _) => 0,
        (_, c) if (1..=255).contains(&c) => c as i32,
        _ => 1,
    }
}
