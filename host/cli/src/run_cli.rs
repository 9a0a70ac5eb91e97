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
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::time::Duration;

/// Options of `gantry run`: the resource flags of `gantry submit` (and srun's spellings).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Whole GPUs per task.
    #[arg(long, visible_alias = "gpus-per-task", conflicts_with_all = ["gpu_milli", "gres"])]
    pub gpus: Option<u32>,
    /// A fraction of one GPU per task, in milli-GPU (e.g. 500).
    #[arg(long, conflicts_with = "gres")]
    pub gpu_milli: Option<u32>,
    /// GPUs per node, as srun --gres=gpu[:TYPE]:N (divided over a node's tasks).
    #[arg(long)]
    pub gres: Option<String>,
    /// Tasks (ranks) of the job (default 1).
    #[arg(short = 'n', long, visible_alias = "ntasks")]
    pub tasks: Option<u32>,
    /// CPU per task in milli-cores (default 1000).
    #[arg(long, conflicts_with = "cpus_per_task")]
    pub cpu_milli: Option<u32>,
    /// Whole cores per task.
    #[arg(short = 'c', long)]
    pub cpus_per_task: Option<u32>,
    /// Memory per task in MiB (default 1024).
    #[arg(long, conflicts_with = "mem")]
    pub mem_mib: Option<u64>,
    /// Memory per node, SLURM style (4096, 500M, 16G), divided over the node's tasks.
    #[arg(long)]
    pub mem: Option<String>,
    /// Time limit, as submit reads it: 90s, 15m, 4h, or SLURM's forms (a bare number is minutes,
    /// 1:00:00, 1-12); the queue may cap interactive jobs.
    #[arg(short = 't', long)]
    pub time: Option<String>,
    /// Queue (default: `default`).
    #[arg(short = 'p', long, visible_alias = "partition")]
    pub queue: Option<String>,
    /// Account.
    #[arg(short = 'A', long)]
    pub account: Option<String>,
    /// Job name (default: the command).
    #[arg(short = 'J', long, visible_alias = "job-name")]
    pub name: Option<String>,
    /// Working directory of the job (default: here).
    #[arg(short = 'D', long)]
    pub chdir: Option<std::path::PathBuf>,
    /// Which of your shell's variables the job gets, as submit's --export (ALL, NONE, or a
    /// list); default: none of them.
    #[arg(long)]
    pub export: Option<String>,
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

pub use crate::run_spec::run_body;

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
    // Dropping `done` ends the forwarder at once (it waits on it between looks).
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let forwarder = {
        let client = client.clone();
        std::thread::spawn(move || forward_interrupts(&client, id, tty, &finished))
    };
    let result = follow(&client, id, tty);
    drop(done);
    let _ = forwarder.join();
    result
}

/// Sends the job SIGINT on the first Ctrl-C (or cancels it while it waits), cancels it on
/// the second; with a terminal, also sends the terminal's new size when it changes.
fn forward_interrupts(client: &Client, id: u64, tty: bool, done: &std::sync::mpsc::Receiver<()>) {
    let mut handled = 0;
    let mut resized = 0;
    loop {
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
        match done.recv_timeout(Duration::from_millis(50)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
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
