//! The client side of the daemon's Unix socket: a `ureq` connector that opens the socket
//! (whatever the URL's host) so the CLI speaks the same HTTP over it as over TCP, and the
//! kernel tells the daemon who is calling.
//!
//! Owns: the connector and its transport. Does not own requests (`client`) or the
//! daemon's side of the socket (the daemon's `local_socket`).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use ureq::Error;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, ShutdownHandle, Transport,
};

/// Connects every request to the Unix socket at `path`.
#[derive(Debug, Clone)]
pub struct UnixConnector {
    path: PathBuf,
}

impl UnixConnector {
    /// A connector for the socket at `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

impl Connector<()> for UnixConnector {
    type Out = UnixTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, Error> {
        let stream = UnixStream::connect(&self.path).map_err(|e| connect_error(&self.path, e))?;
        check_peer(&stream, &self.path)?;
        let stream = Arc::new(Socket(stream));
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        (details.register_shutdown)(Arc::downgrade(&stream) as Weak<dyn ShutdownHandle>)?;
        Ok(Some(UnixTransport {
            stream: stream.clone(),
            buffers,
        }))
    }
}

/// A failed connect to the socket at `path`, naming the path and the operating system's
/// error, with what it most likely means.
fn connect_error(path: &std::path::Path, e: std::io::Error) -> std::io::Error {
    let hint = match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            " (you may not reach it: a directory on its way, or the socket itself, is closed to you; see `ls -ld` of each; the system daemon opens /run/gantry to every user when it starts)"
        }
        std::io::ErrorKind::ConnectionRefused => {
            " (nobody listens on it: a socket left by a daemon that is no longer running)"
        }
        std::io::ErrorKind::NotFound => " (no such socket: is the daemon running?)",
        _ => "",
    };
    std::io::Error::new(
        e.kind(),
        format!("cannot connect to {}: {e}{hint}", path.display()),
    )
}

/// An extra uid whose socket the CLI trusts besides root's and its own: a daemon run by a
/// dedicated account (`GANTRY_DAEMON_UID=<uid>`).
pub const DAEMON_UID_ENV: &str = "GANTRY_DAEMON_UID";

/// Refuses a socket whose listening end is not root, the caller itself or the account named
/// by [`DAEMON_UID_ENV`]: anyone may make a `gantry-data/gantry.sock` in a shared directory,
/// and what the CLI sends it (a job's command, its environment) must reach the daemon only.
fn check_peer(stream: &UnixStream, path: &std::path::Path) -> std::io::Result<()> {
    let peer = rustix::net::sockopt::socket_peercred(stream)?;
    let peer_uid = peer.uid.as_raw();
    let me = rustix::process::getuid().as_raw();
    let daemon = std::env::var(DAEMON_UID_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok());
    if peer_uid == 0 || peer_uid == me || daemon == Some(peer_uid) {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "the socket {} is served by uid {peer_uid}, not by root or you: not talking to it (a daemon of another account: set {DAEMON_UID_ENV}={peer_uid} if you trust it)",
            path.display()
        ),
    ))
}

/// The connected socket, shared with the agent's shutdown handle.
#[derive(Debug)]
struct Socket(UnixStream);

impl std::ops::Deref for Socket {
    type Target = UnixStream;
    fn deref(&self) -> &UnixStream {
        &self.0
    }
}

impl ShutdownHandle for Socket {
    fn shutdown(&self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// One connection over the socket.
#[derive(Debug)]
pub struct UnixTransport {
    stream: Arc<Socket>,
    buffers: LazyBuffers,
}

impl Transport for UnixTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let timeout = timeout.not_zero().map(|t| *t);
        self.stream.set_write_timeout(timeout)?;
        let output = &self.buffers.output()[..amount];
        (&self.stream.0).write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        let limit = timeout.not_zero().map(|t| *t);
        self.stream.set_read_timeout(limit)?;
        let input = self.buffers.input_append_buf();
        let amount = loop {
            match (&self.stream.0).read(input) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(Error::Timeout(timeout.reason));
                }
                Err(e) => return Err(e.into()),
            }
        };
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // A pooled connection is reused only if nothing unexpected arrived on it.
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut byte = [0u8];
        let open = matches!(
            (&self.stream.0).read(&mut byte),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        open && self.stream.set_nonblocking(false).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI's error for a request over the socket at `path`, as it prints it.
    fn failure(path: &std::path::Path) -> String {
        let client = crate::client::Client::new(&format!("unix:{}", path.display()));
        let e = client.get_json("/v1/health").expect_err("no daemon there");
        anyhow_like(&e)
    }

    /// `e` and its sources, joined as `{:#}` of anyhow prints them.
    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            text += &format!(": {s}");
            source = s.source();
        }
        text
    }

    #[test]
    fn a_failed_connect_names_the_socket_and_the_system_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gantry.sock");
        let text = failure(&missing);
        assert!(
            text.contains(&format!("cannot connect to {}", missing.display()))
                && text.contains("No such file or directory")
                && text.contains("is the daemon running"),
            "{text}"
        );
        // A socket nobody listens on any more (a daemon that stopped).
        let stale = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let text = failure(&stale);
        assert!(
            text.contains(&format!("cannot connect to {}", stale.display()))
                && text.contains("Connection refused")
                && text.contains("nobody listens on it"),
            "{text}"
        );
        // Permission denied (a 0700 /run/gantry) cannot be met as root: the message itself.
        let denied = connect_error(
            std::path::Path::new("/run/gantry/gantry.sock"),
            std::io::Error::from_raw_os_error(13), // EACCES
        );
        assert_eq!(denied.kind(), std::io::ErrorKind::PermissionDenied);
        let text = denied.to_string();
        assert!(
            text.starts_with(
                "cannot connect to /run/gantry/gantry.sock: Permission denied (os error 13)"
            ) && text.contains("closed to you"),
            "{text}"
        );
    }
}
