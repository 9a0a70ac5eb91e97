//! SLURM's own command names: the `gantry` binary run as `sbatch`, `squeue`, `scancel`,
//! `sacct`, `sinfo`, `srun`, `salloc` or `scontrol` (its `argv[0]`, through the links
//! `gantry slurm-links DIR` makes) speaks that command's options and output formats, so
//! that tools written for SLURM (submitit, dask-jobqueue, batchspawner, Snakemake) drive
//! Gantry unchanged. Errors are printed as SLURM prints them (`sbatch: error: ...`) and
//! the exit code is non-zero; nothing is submitted after an error.
//!
//! Owns: which command a name is, the client these commands use (the socket or server of
//! `GANTRY_SERVER`, the token of `GANTRY_TOKEN` or `~/.config/gantry/token`) and each
//! command's module. Does not own the `#SBATCH` option table (`sbatch`), the API
//! (`gantry-api`) or Gantry's own subcommands.

mod args;
mod job_fields;
pub mod links;
mod sacct_cmd;
mod sbatch_cmd;
mod scancel_cmd;
mod scontrol_cmd;
mod sinfo_cmd;
mod squeue_cmd;
mod srun_cmd;
mod text_format;

use crate::cli::Client;
use anyhow::Context;

/// A SLURM command Gantry answers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlurmCommand {
    /// Submit a batch script.
    Sbatch,
    /// List pending and running jobs.
    Squeue,
    /// Cancel or signal jobs.
    Scancel,
    /// Jobs from accounting, ended ones included.
    Sacct,
    /// Nodes and partitions.
    Sinfo,
    /// A job step inside a job; outside one, an interactive job.
    Srun,
    /// An interactive allocation (as `srun` outside a job, running a shell).
    Salloc,
    /// Show and change jobs.
    Scontrol,
}

/// Every command, with its name.
pub const COMMANDS: [(&str, SlurmCommand); 8] = [
    ("sbatch", SlurmCommand::Sbatch),
    ("squeue", SlurmCommand::Squeue),
    ("scancel", SlurmCommand::Scancel),
    ("sacct", SlurmCommand::Sacct),
    ("sinfo", SlurmCommand::Sinfo),
    ("srun", SlurmCommand::Srun),
    ("salloc", SlurmCommand::Salloc),
    ("scontrol", SlurmCommand::Scontrol),
];

impl SlurmCommand {
    /// The command the binary was started as, from `argv[0]` (`/usr/local/bin/sbatch`).
    pub fn from_argv0(argv0: &str) -> Option<Self> {
        let name = std::path::Path::new(argv0).file_name()?.to_str()?;
        COMMANDS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
    }

    /// The command's name.
    pub fn name(self) -> &'static str {
        COMMANDS
            .iter()
            .find(|(_, c)| *c == self)
            .map_or("gantry", |(n, _)| n)
    }
}

/// Runs `cmd` with `args` (the words after the command name); the process exit code.
pub fn main(cmd: SlurmCommand, args: &[String]) -> i32 {
    let name = cmd.name();
    if args.iter().any(|a| a == "--version" || a == "-V") && cmd != SlurmCommand::Srun {
        println!("slurm 22.05.0 (Gantry {})", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    let result = match cmd {
        SlurmCommand::Srun if srun_cmd::inside_job() => srun_cmd::step(args),
        _ => client().and_then(|client| match cmd {
            SlurmCommand::Sbatch => sbatch_cmd::run(&client, args),
            SlurmCommand::Squeue => squeue_cmd::run(&client, args),
            SlurmCommand::Scancel => scancel_cmd::run(&client, args),
            SlurmCommand::Sacct => sacct_cmd::run(&client, args),
            SlurmCommand::Sinfo => sinfo_cmd::run(&client, args),
            SlurmCommand::Srun | SlurmCommand::Salloc => srun_cmd::interactive(client, cmd, args),
            SlurmCommand::Scontrol => scontrol_cmd::run(&client, args),
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            1
        }
    }
}

/// The client of the SLURM commands: `GANTRY_SERVER` or the default socket, with the token
/// of `GANTRY_TOKEN` or the token file, if any.
fn client() -> anyhow::Result<Client> {
    let server = std::env::var("GANTRY_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(crate::cli::default_server);
    let ca = std::env::var_os("GANTRY_CA_CERT").map(std::path::PathBuf::from);
    let token = crate::auth_cli::read_token(None)?;
    Ok(crate::cli::client_for(&server, ca.as_deref())
        .context("cannot reach the Gantry daemon")?
        .with_token(token))
}

pub(crate) use crate::export::current_user;

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
