//! The command-line client: every subcommand is one HTTP call to the daemon's API
//! (`--server`, or `GANTRY_SERVER`: `unix:PATH` for the daemon's Unix socket, where the
//! kernel names the caller, or `http(s)://HOST:PORT`; default [`default_server`]), printing a
//! table or the JSON answer. Errors from the API are shown with their code and field.
//! With a token (see `auth_cli::read_token`) every request carries
//! `Authorization: Bearer <token>`. `https://` servers are verified against the public
//! roots, or only against `--ca-cert` (`GANTRY_CA_CERT`) when given (see `tls`).
//!
//! Requests and answers go through the typed client of `gantry-api` (`Client`); this module
//! builds the client from the flags and prints the answers.
//!
//! Owns: argument → request mapping and output formatting. Holds no state.

use anyhow::{Context, bail};
use gantry_api::model::{JobRecord, JobState};
use gantry_api::views::NodeView;
use gantry_contract::JobKind;
use serde_json::Value;
use std::io::Read;

/// The socket `gantry serve` makes with its default data directory, relative to where it runs
/// (a daemon not run as root).
const DEFAULT_SOCKET: &str = "gantry-data/gantry.sock";

/// The server when none is given: the Unix socket of a daemon started here
/// (`gantry-data/gantry.sock`), else the system daemon's (`/run/gantry/gantry.sock`, root's
/// default), else `http://127.0.0.1:8420`.
pub fn default_server() -> String {
    default_server_among(DEFAULT_SOCKET, gantry_config::SYSTEM_SOCKET)
}

/// [`default_server`] with its two sockets given. The system socket is chosen also when this
/// user may not look at it (a directory on its way closed to them): connecting then fails
/// naming that error and the path, where a fall-back to TCP would say "connection refused".
fn default_server_among(local: &str, system: &str) -> String {
    use std::os::unix::fs::FileTypeExt;
    let seen = |p: &str| std::fs::symlink_metadata(p).map(|m| m.file_type().is_socket());
    if seen(local).unwrap_or(false) {
        return format!("unix:{local}");
    }
    if socket_or_hidden(seen(system)) {
        return format!("unix:{system}");
    }
    format!("http://{}", gantry_config::DEFAULT_LISTEN)
}

/// Whether a look at the system socket found a socket, or was refused (permission denied).
fn socket_or_hidden(seen: std::io::Result<bool>) -> bool {
    match seen {
        Ok(is_socket) => is_socket,
        Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
    }
}

/// Says on stderr, once, that a request goes without an identity (TCP without a token), what
/// that means and how to have one.
pub fn warn_if_anonymous(client: &Client) {
    if client.has_token() || client.server().starts_with("unix:") {
        return;
    }
    eprintln!(
        "gantry: note: no identity: {} without a token, so the job belongs to the user `anonymous` and runs as the daemon's fallback account. To be yourself, run where the daemon's socket is ({DEFAULT_SOCKET}, or {}), pass --server unix:PATH, or set GANTRY_TOKEN (see `gantry whoami`).",
        client.server(),
        gantry_config::SYSTEM_SOCKET
    );
}

/// The job ids `args` name: each an id or a range `FIRST-LAST` (at most 100,000 ids in all).
pub fn job_ids(args: &[String]) -> anyhow::Result<Vec<u64>> {
    const MAX_IDS: u64 = 100_000;
    let mut ids = Vec::new();
    for arg in args {
        let number = |s: &str| {
            s.trim()
                .parse::<u64>()
                .with_context(|| format!("{arg:?} is not a job id or a range of them (12-20)"))
        };
        let (first, last) = match arg.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(arg)?, number(arg)?),
        };
        if first > last || (ids.len() as u64) + (last - first) >= MAX_IDS {
            bail!("{arg:?}: give a range FIRST-LAST with FIRST <= LAST, {MAX_IDS} ids at most");
        }
        ids.extend(first..=last);
    }
    Ok(ids)
}

/// Prints text a job wrote: on a terminal its control sequences are shown, not obeyed.
pub fn print_job_text(text: &str) {
    use std::io::Write;
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        print!("{}", crate::terminal_text::escape_controls(text));
    } else {
        print!("{text}");
    }
    let _ = std::io::stdout().flush();
}

/// `gantry logs -f`: prints the log of task `task` of job `id` as it grows, every half
/// second, until the job has ended and nothing more is there.
pub fn follow_log(client: &Client, id: u64, task: usize) -> anyhow::Result<()> {
    let mut offset = 0;
    loop {
        let (text, next) = client.logs_from(id, task, offset)?;
        print_job_text(&text);
        if next > offset {
            offset = next;
            continue;
        }
        if client.job(id)?.state.is_terminal() {
            // One last read: what the task wrote just before it ended.
            let (text, _) = client.logs_from(id, task, offset)?;
            print_job_text(&text);
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// `gantry whoami`: who the daemon takes you for, over which way in.
pub fn whoami(client: &Client) -> anyhow::Result<()> {
    let who = client.whoami()?;
    let role = who["role"].as_str().unwrap_or("?");
    if who["authenticated"].as_bool() == Some(true) {
        let user = who["user"].as_str().unwrap_or("?");
        let via = who["token"].as_str().unwrap_or("?");
        println!("{user} (role {role}; {via}; server {})", client.server());
    } else {
        println!(
            "anonymous (role {role}; no identity: TCP without a token; server {})",
            client.server()
        );
        warn_if_anonymous(client);
    }
    Ok(())
}

/// A client of the daemon: the typed client of `gantry-api`.
pub use gantry_api::client::{Client, percent_encode};

/// A client for `server` that trusts, for `https://`, only the certificates in the PEM
/// file `ca_cert` (a private CA or the daemon's self-signed certificate) when given, and
/// the public roots otherwise.
pub fn client_for(
    server: &str,
    ca_cert: Option<&std::path::Path>,
) -> Result<Client, gantry_config::tls::TlsError> {
    Ok(Client::with_tls(
        server,
        gantry_config::tls::ureq_tls("--ca-cert", ca_cert)?,
    ))
}

/// `--env K=V` options as the job spec's `env` object.
pub fn env_vars(pairs: &[String]) -> anyhow::Result<serde_json::Map<String, Value>> {
    let mut env = serde_json::Map::new();
    for kv in pairs {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--env `{kv}` is not K=V"))?;
        env.insert(k.into(), Value::String(v.into()));
    }
    Ok(env)
}

/// Parses "90", "90s", "15m", "4h", "2d" into seconds.
pub fn parse_duration_s(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = num
        .parse()
        .with_context(|| format!("`{text}` is not a duration like 90s, 15m, 4h or 2d"))?;
    let mult = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => bail!("`{text}`: unknown unit `{unit}` (use s, m, h or d)"),
    };
    Ok(n * mult)
}

/// A value as a table cell: its JSON text, without quotes for a string (e.g. a `ReasonCode`).
pub(crate) fn wire_text<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(v) => v.to_string(),
        Err(_) => "?".into(),
    }
}

/// `-` for a missing value, else the value.
fn or_dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// Prints nodes: state (with the drain's reason, who and how long ago), GPU groups,
/// and per GPU its holders, health and MIG devices.
pub fn print_nodes(nodes: &[NodeView]) {
    for n in nodes {
        println!(
            "{} ({}, GPUs from {}): CPU {}/{} milli, memory {}/{} MiB",
            n.name,
            n.state,
            n.gpu_source,
            n.cpu_milli_allocated,
            n.cpu_milli,
            n.memory_mib_allocated,
            n.memory_mib
        );
        if n.agent != "local" {
            println!(
                "  agent {} (address {}), last heartbeat {}",
                n.agent,
                n.addr,
                ago(n.last_heartbeat_ms)
            );
        }
        if let Some(reason) = &n.down_reason {
            println!("  DOWN {}: {reason}", ago(n.down_since_ms));
        }
        if let Some(d) = &n.drain {
            println!(
                "  drained by {} {}: {}",
                d.by,
                ago(Some(d.since_ms)),
                d.reason
            );
        }
        if let Some(groups) = n.labels.get("gantry.io/gpu-groups") {
            println!("  GPU groups (NVLink): {groups}");
        }
        for g in &n.gpus {
            let health = match &g.health {
                Some(h) => format!("  UNHEALTHY {}: {}", ago(Some(h.since_ms)), h.reason),
                None => String::new(),
            };
            println!(
                "  GPU {:>2} {:<16} {:>4}/1000 milli  {}{health}",
                g.index,
                g.model,
                g.allocated_milli,
                holders_text(&g.jobs)
            );
            if let Some(check) = g.health.as_ref().and_then(|h| h.check.as_deref()) {
                println!("       out of service until the node check passes; last: {check}");
            }
            for m in &g.mig_slices {
                println!(
                    "       MIG {:>4} {:<10} {:>6} MiB {}  {}",
                    m.index,
                    m.profile,
                    m.memory_mib,
                    m.uuid,
                    holders_text(&m.jobs)
                );
            }
        }
        for note in &n.notes {
            println!("  note: {note}");
        }
    }
}

/// `job 7 (1000 milli), job 9 (500 milli)` for a device's holders, or `free`.
fn holders_text(jobs: &[(u64, u32)]) -> String {
    if jobs.is_empty() {
        return "free".to_string();
    }
    jobs.iter()
        .map(|(job, milli)| format!("job {job} ({milli} milli)"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "since 5m ago" for a time in ms since the Unix epoch.
fn ago(ms: Option<u64>) -> String {
    let Some(then) = ms else {
        return String::new();
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let s = now.saturating_sub(then) / 1000;
    let text = match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    };
    format!("since {text} ago")
}

/// Reads a whole file (for uploads and pipeline files).
pub fn read_file(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

pub use gantry_config::pipeline_file::{parse_pipeline_text, read_pipeline};

/// `service: <node>:<port> (healthy, 2 restarts)` for a service job, else `None`.
pub fn service_line(job: &JobRecord) -> Option<String> {
    if job.spec.kind != JobKind::Service {
        return None;
    }
    let node = job.tasks.first().map_or("-", |t| t.node.as_str());
    let state = if job.state != JobState::Running {
        job.state.as_str()
    } else if job.restart_at_ms.is_some() {
        "restarting"
    } else {
        job.health.as_ref().map_or("starting", |h| h.state.as_str())
    };
    let restarts = job.restarts;
    let plural = if restarts == 1 { "" } else { "s" };
    Some(format!(
        "service: {node}:{} ({state}, {restarts} restart{plural})",
        or_dash(job.service_port)
    ))
}

/// Prints JSON prettily.
pub fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn ids_and_ranges_as_scancel_takes_them() {
        assert_eq!(
            job_ids(&strings(&["8", "9", "12-14"])).unwrap(),
            vec![8, 9, 12, 13, 14]
        );
        assert!(job_ids(&strings(&["14-12"])).is_err());
        assert!(job_ids(&strings(&["x"])).is_err());
        assert!(job_ids(&strings(&["0-100000"])).is_err());
    }

    #[test]
    fn the_system_socket_is_chosen_when_it_is_there_or_hidden_from_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("gantry-data/gantry.sock");
        let system = dir.path().join("run/gantry.sock");
        let (local_s, system_s) = (local.to_str().unwrap(), system.to_str().unwrap());
        let tcp = format!("http://{}", gantry_config::DEFAULT_LISTEN);
        assert_eq!(default_server_among(local_s, system_s), tcp);
        std::fs::create_dir_all(system.parent().unwrap()).unwrap();
        let _system = std::os::unix::net::UnixListener::bind(&system).unwrap();
        assert_eq!(
            default_server_among(local_s, system_s),
            format!("unix:{system_s}")
        );
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        let _local = std::os::unix::net::UnixListener::bind(&local).unwrap();
        assert_eq!(
            default_server_among(local_s, system_s),
            format!("unix:{local_s}")
        );
        // A /run/gantry closed to the caller (a test run as root cannot meet it): the socket
        // is still the one tried, so the error names it; a file that is no socket is not.
        let denied = std::io::Error::from_raw_os_error(13); // EACCES
        assert!(socket_or_hidden(Err(denied)));
        assert!(!socket_or_hidden(Err(std::io::ErrorKind::NotFound.into())));
        assert!(!socket_or_hidden(Ok(false)));
    }
}
