//! A bounded Unix-socket listener: at most `total` connections open at once, and at most
//! `per_uid` of them from one local account (the kernel's uid of the peer), so that one
//! account cannot take every file descriptor of the daemon. A connection past a limit is
//! closed at once, unread.
//!
//! Owns: counting and the wrapped stream that gives its slot back when closed. Does not own
//! what is served (`crate::api`) or who the peer is (`PeerCred`, in `mod.rs`).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};

/// Open connections by uid (`None`: a peer the kernel did not name).
type Counts = Arc<Mutex<HashMap<Option<u32>, usize>>>;

/// A Unix listener that bounds its open connections.
#[derive(Debug)]
pub struct LimitedUnixListener {
    inner: UnixListener,
    counts: Counts,
    total: usize,
    per_uid: usize,
}

impl LimitedUnixListener {
    /// Wraps `inner`: at most `total` connections, `per_uid` of them from one account.
    pub fn new(inner: UnixListener, total: usize, per_uid: usize) -> Self {
        Self {
            inner,
            counts: Arc::default(),
            total: total.max(1),
            per_uid: per_uid.max(1),
        }
    }

    /// Takes a slot for a connection of `uid`, if one is free.
    fn admit(&self, uid: Option<u32>) -> bool {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let open: usize = counts.values().sum();
        let mine = counts.get(&uid).copied().unwrap_or(0);
        if open >= self.total || mine >= self.per_uid {
            return false;
        }
        *counts.entry(uid).or_default() += 1;
        true
    }
}

impl axum::serve::Listener for LimitedUnixListener {
    type Io = CountedStream;
    type Addr = tokio::net::unix::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.inner.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a Unix-socket connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let uid = stream.peer_cred().ok().map(|c| c.uid());
            if !self.admit(uid) {
                tracing::warn!(?uid, "Unix-socket connection refused: too many open");
                continue;
            }
            let counted = CountedStream {
                stream,
                uid,
                counts: self.counts.clone(),
            };
            return (counted, addr);
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An admitted connection; its slot is given back when it is dropped.
#[derive(Debug)]
pub struct CountedStream {
    stream: UnixStream,
    uid: Option<u32>,
    counts: Counts,
}

impl CountedStream {
    /// The connected socket.
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }
}

impl Drop for CountedStream {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.uid);
            }
        }
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_overall_and_per_account_and_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let inner = UnixListener::bind(dir.path().join("s")).unwrap();
            let limited = LimitedUnixListener::new(inner, 3, 2);
            assert!(limited.admit(Some(1000)));
            assert!(limited.admit(Some(1000)));
            assert!(!limited.admit(Some(1000)), "per account");
            assert!(limited.admit(Some(1001)));
            assert!(!limited.admit(Some(1002)), "overall");
            let (a, _b) = UnixStream::pair().unwrap();
            drop(CountedStream {
                stream: a,
                uid: Some(1000),
                counts: limited.counts.clone(),
            });
            assert!(
                limited.admit(Some(1002)),
                "a closed connection's slot comes back"
            );
        });
    }
}
