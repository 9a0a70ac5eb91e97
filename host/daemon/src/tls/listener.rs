//! [`TlsListener`]: an `axum::serve` listener that hands out TLS streams.
//!
//! One task accepts TCP connections and runs each handshake in its own task (bounded in
//! time and in number), so a slow or hostile client cannot hold up the others; finished
//! handshakes reach `axum::serve` through a channel. A connection whose handshake fails
//! (e.g. a plain-HTTP request to the HTTPS port) is closed and logged at debug level.
//!
//! Owns: the accept loop and handshakes. Does not own: loading certificates (`tls`), or
//! what is served (`api`).

use super::ServerTls;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A client has this long to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many handshakes run at once; further connections wait in the TCP backlog.
const MAX_HANDSHAKES: usize = 256;

/// Established TLS connections waiting for `axum::serve` to take them.
const READY_QUEUE: usize = 64;

/// Accepts TCP connections on a bound listener and yields them after the TLS handshake.
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accept_loop: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `tcp` with the certificate in `tls` (needs a tokio runtime).
    pub fn new(tcp: TcpListener, tls: &ServerTls) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        let acceptor = TlsAcceptor::from(tls.config());
        let accept_loop = tokio::spawn(accept_loop(tcp, acceptor, tx));
        Ok(Self {
            ready,
            local,
            accept_loop,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        // Stop accepting (and release the port) when the server is done with us.
        self.accept_loop.abort();
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "cannot accept a TCP connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if tx.is_closed() {
            return;
        }
        // The handshake is several small writes each way: without this, Nagle's algorithm
        // and delayed ACKs add ~40 ms to every new connection.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
        }
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = tx.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop only ends when the listener is dropped; never yield then.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
