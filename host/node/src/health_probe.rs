//! The node's half of a service's health check: an HTTP GET of
//! `http://127.0.0.1:<port><path>` — the service's own port, held by its user, nothing else
//! (a 2xx answer is healthy) — or a command run exactly as the service's tasks run (its user,
//! its rank-0 task's cgroup, the job's environment only, its working directory entered as
//! that user: `Executor::check_command`; exit 0 is healthy), each bounded by a time limit,
//! and why it failed ([`ProbeError`]). The daemon's controller runs these for a service on
//! its own node, an agent for one on its node.
//!
//! Owns: running one probe on this node and saying why it failed. Does not own which probe
//! runs where or when, or what failures lead to (the daemon's `scheduler::service`), nor the
//! request an agent receives (`gantry_api::cluster::CheckRequest`).

use crate::executor::Executor;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Most bytes of an answer read while looking for its status line.
const MAX_HEAD: usize = 8 * 1024;
/// Most characters of a failed command's stderr kept in the error.
const MAX_STDERR: usize = 200;

/// Why a probe found the service unhealthy.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// An HTTP check of a service without a port.
    #[error("the service has no port")]
    NoPort,
    /// The path cannot go on a request line.
    #[error("http_path {0:?} contains spaces or control characters")]
    BadPath(String),
    /// Connecting, sending or reading failed.
    #[error("GET {path} on port {port}: {source}")]
    Http {
        /// The checked path.
        path: String,
        /// The service's port.
        port: u16,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// Nothing of the service's user listens on the port (so the probe is not sent).
    #[error(
        "port {port} is not held by the service's user (listening uids: {holders:?}); not probed"
    )]
    NotTheServicesPort {
        /// The service's port.
        port: u16,
        /// uids of the sockets listening there.
        holders: Vec<u32>,
    },
    /// The answer has no HTTP status line.
    #[error("GET {path} on port {port}: not an HTTP answer ({line:?})")]
    NotHttp {
        /// The checked path.
        path: String,
        /// The service's port.
        port: u16,
        /// The start of what came back.
        line: String,
    },
    /// A status outside 200..=299.
    #[error("GET {path} on port {port} answered {status}")]
    Status {
        /// The checked path.
        path: String,
        /// The service's port.
        port: u16,
        /// The HTTP status.
        status: u16,
    },
    /// The check command on the service's node failed, or its agent could not run it.
    #[error("on the service's node: {0}")]
    Remote(String),
    /// No answer, or the command still running, after the check's interval.
    #[error("no answer within {0} s")]
    Timeout(u32),
    /// A command check with an empty command.
    #[error("the check command is empty")]
    EmptyCommand,
    /// The command could not be started or waited for.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The command's program.
        program: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The command failed.
    #[error("{program} {status}{stderr}")]
    Failed {
        /// The command's program.
        program: String,
        /// How it ended.
        status: String,
        /// `: <last stderr line>`, or empty.
        stderr: String,
    },
}

/// `GET path` on `host`:`port` as plain HTTP/1.1; healthy on a 2xx status.
async fn http_get(host: &str, port: u16, path: &str) -> Result<(), ProbeError> {
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ProbeError::BadPath(path.to_string()));
    }
    let io = |source| ProbeError::Http {
        path: path.to_string(),
        port,
        source,
    };
    let mut stream = TcpStream::connect((host, port)).await.map_err(io)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: gantry-health-check\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.map_err(io)?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.contains(&b'\n') && head.len() < MAX_HEAD {
        let n = stream.read(&mut buf).await.map_err(io)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or("").trim();
    let status = status_code(line).ok_or_else(|| ProbeError::NotHttp {
        path: path.to_string(),
        port,
        line: line.chars().take(80).collect(),
    })?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(ProbeError::Status {
            path: path.to_string(),
            port,
            status,
        })
    }
}

/// The status of an HTTP status line (`HTTP/1.1 200 OK`).
fn status_code(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// An HTTP check of a service on this node: sent only to a port a socket of the service's
/// user (`owner`, when tasks run as their users) listens on, then `GET path` on 127.0.0.1.
/// Also what an agent runs for an HTTP check of a service on its node.
pub async fn http_on_this_node(
    path: &str,
    port: u16,
    owner: Option<u32>,
    limit: Duration,
) -> Result<(), ProbeError> {
    if let Some(uid) = owner {
        let holders = crate::port_owner::listeners(port);
        if !holders.contains(&uid) {
            return Err(ProbeError::NotTheServicesPort { port, holders });
        }
    }
    tokio::time::timeout(limit, http_get("127.0.0.1", port, path))
        .await
        .map_err(|_| ProbeError::Timeout(0))?
}

/// One check command: what runs, as whom, for which task, with what.
pub struct CommandRun<'a> {
    /// The command.
    pub argv: &'a [String],
    /// The job's user and whether it is anonymous (`Executor::identity`).
    pub user: (&'a str, bool),
    /// (job id, task index) of the checked task.
    pub task: (u64, u32),
    /// The job's variables.
    pub env: &'a [(String, String)],
    /// The working directory (entered as the user).
    pub workdir: &'a std::path::Path,
}

/// Runs a check command as the service's task runs (`Executor::check_command`), in its own
/// process group; healthy on exit 0. Killed (the whole group) after `limit`. Also what an
/// agent runs for a check of a service on its node.
pub async fn run_command(
    run: &CommandRun<'_>,
    limit: Duration,
    executor: &Executor,
) -> Result<(), ProbeError> {
    let program = run.argv.first().ok_or(ProbeError::EmptyCommand)?;
    let spawn_error = |source| ProbeError::Spawn {
        program: program.clone(),
        source,
    };
    let mut cmd = executor
        .check_command(run.argv, run.user, run.task, run.env, run.workdir)
        .map_err(|e| match e {
            crate::executor::CheckError::Empty => ProbeError::EmptyCommand,
            e => spawn_error(std::io::Error::other(e.to_string())),
        })?;
    let child = cmd.spawn().map_err(spawn_error)?;
    let pid = child.id();
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
            Err(ProbeError::Failed {
                program: program.clone(),
                status: describe(out.status),
                stderr: last.map_or_else(String::new, |l| {
                    format!(
                        ": {}",
                        l.trim().chars().take(MAX_STDERR).collect::<String>()
                    )
                }),
            })
        }
        Ok(Err(e)) => Err(spawn_error(e)),
        Err(_) => {
            if let Some(pid) = pid {
                executor.kill_now(pid);
            }
            Err(ProbeError::Timeout(0))
        }
    }
}

/// `exited with code 1`, `was killed by signal 9`.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::path::PathBuf;
    use tokio::net::TcpListener;

    /// A one-connection HTTP server answering `answer`; returns its port.
    async fn serve_once(answer: &'static str) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            assert!(buf[..n].starts_with(b"GET /healthz HTTP/1.1\r\n"));
            s.write_all(answer.as_bytes()).await.unwrap();
        });
        port
    }

    #[tokio::test]
    async fn http_probe_wants_a_2xx_answer() {
        let ok = serve_once("HTTP/1.0 204 No Content\r\n\r\n").await;
        http_get("127.0.0.1", ok, "/healthz").await.unwrap();
        let bad = serve_once("HTTP/1.1 500 Internal Server Error\r\n\r\n").await;
        let e = http_get("127.0.0.1", bad, "/healthz").await.unwrap_err();
        assert!(e.to_string().ends_with("answered 500"), "{e}");
        let junk = serve_once("SSH-2.0-OpenSSH\r\n").await;
        let e = http_get("127.0.0.1", junk, "/healthz").await.unwrap_err();
        assert!(matches!(e, ProbeError::NotHttp { .. }), "{e}");
        assert!(matches!(
            http_get("127.0.0.1", ok, "/a b").await,
            Err(ProbeError::BadPath(_))
        ));
    }

    #[tokio::test]
    async fn command_probe_wants_exit_0_within_the_limit() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let executor = Executor::new(PathBuf::from("/nonexistent"), tx);
        let env = vec![("WHY".to_string(), "broken".to_string())];
        let workdir = std::env::temp_dir();
        let argv = |s: &str| vec!["/bin/sh".to_string(), "-c".into(), s.into()];
        let ok = argv("exit 0");
        let failing = argv("echo $WHY >&2; exit 3");
        let run = |argv: &[String]| CommandRun {
            argv: argv.to_vec().leak(),
            user: ("nobody", false),
            task: (1, 0),
            env: env.clone().leak(),
            workdir: std::env::temp_dir().leak(),
        };
        let limit = Duration::from_secs(5);
        run_command(&run(&ok), limit, &executor).await.unwrap();
        let e = run_command(&run(&failing), limit, &executor)
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "/bin/sh exited with code 3: broken");
        let t0 = std::time::Instant::now();
        let short = Duration::from_millis(300);
        let slow = argv("sleep 30");
        let e = run_command(
            &CommandRun {
                argv: &slow,
                user: ("nobody", false),
                task: (1, 0),
                env: &env,
                workdir: &workdir,
            },
            short,
            &executor,
        )
        .await
        .unwrap_err();
        assert!(matches!(e, ProbeError::Timeout(_)), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn status_lines_parse() {
        assert_eq!(status_code("HTTP/1.1 200 OK"), Some(200));
        assert_eq!(status_code("HTTP/1.0 503"), Some(503));
        assert_eq!(status_code("hello 200"), None);
        assert_eq!(status_code(""), None);
    }
}
