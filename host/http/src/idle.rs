//! Silence on a connection: [`Activity`] records when a byte last went either way and how
//! many requests are being handled; [`Watched`] is the connection's I/O, touching it on
//! every read and write; [`TimedBody`] is a request body that fails with [`BodyStalled`]
//! when no byte of it arrives for the idle timeout (so a handler waiting for a stalled
//! upload does not hold the connection forever).
//!
//! The accept loop (`http_server`) closes a connection that is idle: nothing handled and
//! nothing read or written for `[http] idle_timeout_s`. A streaming answer (`/v1/stream`,
//! attach) writes at least every 15 s, so it is never idle while its client reads it.
//!
//! Owns: the activity bookkeeping. Does not own the decision to close (`http_server`).

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// When a connection last moved a byte, and how many of its requests are being handled.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    last_ms: AtomicU64,
    busy: AtomicUsize,
}

/// A request being handled; the connection is not idle while it lives.
#[derive(Debug)]
pub(crate) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn touch(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Marks a request as being handled until the guard is dropped.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    /// How long the connection has been idle (`None` while a request is being handled).
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        if self.busy.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let since = self
            .now_ms()
            .saturating_sub(self.last_ms.load(Ordering::Relaxed));
        Some(Duration::from_millis(since))
    }
}

/// A connection's I/O that records its activity.
#[derive(Debug)]
pub(crate) struct Watched<T> {
    inner: T,
    activity: Arc<Activity>,
}

impl<T> Watched<T> {
    pub(crate) fn new(inner: T, activity: Arc<Activity>) -> Self {
        activity.touch();
        Self { inner, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request body that went silent for the idle timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body stalled: no byte of it arrived for {0:?}")]
pub struct BodyStalled(pub Duration);

/// A request body that fails with [`BodyStalled`] after `stall` without a byte.
#[derive(Debug)]
pub(crate) struct TimedBody {
    inner: Incoming,
    stall: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl TimedBody {
    pub(crate) fn new(inner: Incoming, stall: Duration) -> Self {
        Self {
            inner,
            stall,
            timer: None,
        }
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.timer = None;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let stall = this.stall;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyStalled(stall))))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn busy_connections_are_never_idle_and_io_resets_the_clock() {
        let a = Activity::new();
        assert!(a.idle_for().is_some_and(|d| d < Duration::from_secs(5)));
        let busy = a.busy();
        assert_eq!(a.idle_for(), None);
        drop(busy);
        assert!(a.idle_for().is_some());
        let (client, server) = tokio::io::duplex(64);
        let mut watched = Watched::new(server, a.clone());
        let mut client = client;
        tokio::io::AsyncWriteExt::write_all(&mut client, b"x")
            .await
            .expect("write");
        let mut byte = [0u8; 1];
        tokio::io::AsyncReadExt::read_exact(&mut watched, &mut byte)
            .await
            .expect("read");
        assert_eq!(&byte, b"x");
        assert!(a.idle_for().is_some_and(|d| d < Duration::from_secs(5)));
    }
}
