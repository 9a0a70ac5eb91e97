//! `gantry-http`: the HTTP server of `gantry serve` and `gantry agent`, in place of `axum::serve` (which
//! has no timeouts and no connection limits): one accept loop per listener and one task per
//! connection, served by hyper's HTTP/1.1 server.
//!
//! - Connections are counted overall and per peer IP address (`[http] max_connections`,
//!   `max_connections_per_ip`; `limits`). One over a limit is answered `503` with a JSON
//!   error at once (plain HTTP; over TLS it is just closed), before any of it is read.
//! - A client has `header_read_timeout_s` to send a request's headers, on a new connection
//!   and between requests on a kept-alive one; hyper closes the connection after that. Over
//!   TLS the handshake has the same time.
//! - A connection with no request being handled and no byte read or written for
//!   `idle_timeout_s` is closed, and a request body that stalls that long fails (`idle`).
//! - Every request carries a [`ConnInfo`] extension (peer, the local address the client
//!   reached, the Host rules) for the routers' guards (`checks`, `api::guard`).
//!
//! On shutdown it stops accepting, asks every connection to finish its request and close,
//! and waits for them at most [`DRAIN`].
//!
//! The daemon's local Unix socket ([`local_socket`]: bind, peer credentials, per-uid
//! connection limits) is transport too and lives here, and so does telling systemd the
//! daemon is ready or stopping ([`sd_notify`]).
//!
//! Owns: the accept loop, TLS handshakes of accepted connections (with `gantry_config::tls`'s
//! rustls config), and per-connection limits and timeouts. Does not own the `[http]` settings
//! (`gantry_config::http`), what is served (the daemon's `api`, `gantry_agent::server`) or
//! certificates (`gantry_config::tls`), and knows neither the daemon nor the agent crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod checks;
pub mod host;
mod idle;
pub mod limits;
pub mod local_socket;
pub mod sd_notify;

pub use idle::BodyStalled;

use axum::Router;
use axum::body::Body;
use host::HostRules;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use idle::{Activity, TimedBody, Watched};
use limits::{ConnLimiter, ConnPermit, ConnRefused};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

/// How long shutdown waits for open connections to finish.
pub const DRAIN: Duration = Duration::from_secs(10);

/// At most one warning about refused connections this often (they are logged at debug).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The connection a request came on (a request extension, set by [`serve`]).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The client's address.
    pub peer: SocketAddr,
    /// The local address the client reached (the listening one, or on a wildcard listener
    /// the interface's).
    pub local: SocketAddr,
    /// The names this server answers to.
    pub rules: Arc<HostRules>,
}

/// What [`serve`] serves with.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// The `[http]` settings.
    pub settings: gantry_config::http::HttpSettings,
    /// Names the server answers to besides `allowed_hosts` (an agent's advertised address).
    pub extra_hosts: Vec<String>,
    /// TLS: serve HTTPS only with this rustls config.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header_read: Duration,
    idle: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves (see the module's documentation).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let s = &options.settings;
    let limiter = ConnLimiter::new(
        s.max_connections,
        s.max_connections_per_ip,
        limits::CallerPrefixes::of(s),
    );
    let rules = Arc::new(HostRules::new(&s.allowed_hosts, &options.extra_hosts));
    let timeouts = Timeouts {
        header_read: Duration::from_secs(s.header_read_timeout_s),
        idle: Duration::from_secs(s.idle_timeout_s),
    };
    let tls = options.tls.map(tokio_rustls::TlsAcceptor::from);
    let listening = listener.local_addr()?;
    let (stop_tx, stop_rx) = watch::channel(());
    let mut last_warning: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a TCP connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let permit = match limiter.try_acquire(peer.ip()) {
            Ok(p) => p,
            Err(why) => {
                if last_warning.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    last_warning = Some(Instant::now());
                    tracing::warn!(%peer, "connection refused: {why}");
                } else {
                    tracing::debug!(%peer, "connection refused: {why}");
                }
                if tls.is_none() {
                    answer_busy(&stream, &why);
                }
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
        }
        let info = ConnInfo {
            peer,
            local: stream.local_addr().unwrap_or(listening),
            rules: rules.clone(),
        };
        let conn = Connection {
            app: app.clone(),
            info,
            timeouts,
            stop: stop_rx.clone(),
            _permit: permit,
        };
        tokio::spawn(conn.run(stream, tls.clone()));
    }
    drop(listener);
    drop(stop_tx);
    if !limiter.wait_closed(DRAIN).await {
        tracing::info!(
            open = limiter.open(),
            "stopping with connections still open (streams)"
        );
    }
    Ok(())
}

/// Tells a refused plain-HTTP client why (one write that never waits), then closes.
fn answer_busy(stream: &TcpStream, why: &ConnRefused) {
    let body = serde_json::json!({"error": {
        "code": "too-many-connections",
        "message": format!("{why}; try again later"),
        "field": "connection",
    }})
    .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n",
        body.len()
    );
    let _ = stream.try_write(format!("{head}{body}").as_bytes());
}

/// One accepted connection.
struct Connection {
    app: Router,
    info: ConnInfo,
    timeouts: Timeouts,
    stop: watch::Receiver<()>,
    _permit: ConnPermit,
}

impl Connection {
    async fn run(self, stream: TcpStream, tls: Option<tokio_rustls::TlsAcceptor>) {
        let Some(acceptor) = tls else {
            return self.serve(stream).await;
        };
        let peer = self.info.peer;
        match tokio::time::timeout(self.timeouts.header_read, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => self.serve(stream).await,
            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
        }
    }

    async fn serve<T>(mut self, io: T)
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Activity::new();
        let io = TokioIo::new(Watched::new(io, activity.clone()));
        let service = PerRequest {
            app: self.app.clone(),
            info: self.info.clone(),
            activity: activity.clone(),
            stall: self.timeouts.idle,
        };
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.timeouts.header_read)
            .keep_alive(true);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        let every =
            (self.timeouts.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let peer = self.info.peer;
        let mut stopping = false;
        loop {
            tokio::select! {
                ended = conn.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                    return;
                }
                _ = self.stop.changed(), if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = tick.tick() => {
                    if activity.idle_for().is_some_and(|d| d >= self.timeouts.idle) {
                        tracing::debug!(%peer, "closing an idle connection");
                        return;
                    }
                }
            }
        }
    }
}

/// The service of one connection: marks it busy while a request is handled, bounds body
/// stalls, and gives each request the connection's [`ConnInfo`].
#[derive(Clone)]
struct PerRequest {
    app: Router,
    info: ConnInfo,
    activity: Arc<Activity>,
    stall: Duration,
}

impl hyper::service::Service<hyper::Request<Incoming>> for PerRequest {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<axum::response::Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let busy = self.activity.busy();
        let stall = self.stall;
        let mut req = req.map(|body| Body::new(TimedBody::new(body, stall)));
        req.extensions_mut().insert(self.info.clone());
        let app = self.app.clone();
        Box::pin(async move {
            let response = app.oneshot(req).await;
            drop(busy);
            response
        })
    }
}

/// Resolves on SIGINT or SIGTERM (the controller's, a standby's and the agent's).
pub async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
