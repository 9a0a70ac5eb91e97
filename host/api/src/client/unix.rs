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
        let stream = Arc::new(Socket(UnixStream::connect(&self.path)?));
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
