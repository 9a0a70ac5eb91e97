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
        let stream = UnixStream::connect(&self.path)?;
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
