//! One service's balancer: which replica gets a request (the ready one with the fewest
//! requests in flight, in turn among equals), forwarding it over a hyper client
//! connection, and the retry: an idempotent request (GET, HEAD, OPTIONS, PUT, DELETE; its
//! body read first, at most [`RETRY_BODY_MAX`]) whose replica refuses the connection or
//! dies before answering goes to another replica, once (to the same one after a pause
//! when it is the only one). Connections to replicas are kept
//! open and reused (hyper's pooled client, idle ones closed after 30 s). A request to a service scaled to
//! zero by its autoscaler starts a replica and waits for it (at most
//! `services.activation_timeout_s`). Responses stream through as they come.
//!
//! Every new connection to a replica on this node is checked once made: the socket that
//! accepted it must be the replica's user's (`OwnerChecked`, `send`), else nothing is sent
//! on it (issue 43, finding 8; which replicas are backends at all: `port_guard`).
//!
//! Owns: choosing, counting in flight, forwarding, retrying, activation. Does not own the
//! listeners (`service_endpoint.rs`, `gateway.rs`) nor which replicas are ready
//! (`gantry_controller`'s `service_sets.rs`).

use gantry_controller::Services;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What flows both ways: a body streamed through, or one read whole.
pub(crate) type Body = Either<Incoming, Full<Bytes>>;

/// How long a replica may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the list of ready replicas is reused (a drain waits longer than this).
const BACKENDS_TTL: Duration = Duration::from_millis(100);
/// Before a retry on the same replica (the service has no other).
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Largest body of an idempotent request, read whole so that it can be sent again.
const RETRY_BODY_MAX: usize = 1 << 20;

type Backend = (u64, SocketAddr, Arc<AtomicUsize>);

/// Counts a request in flight to one replica while it lives.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The balancer of one service.
pub(crate) struct Endpoint {
    services: Services,
    id: u64,
    backends: Mutex<Option<(Instant, Vec<Backend>)>>,
    turn: AtomicUsize,
    activity: Arc<AtomicU64>,
    activation_timeout: Duration,
    /// Kept-alive connections to the replicas.
    client: Client<OwnerChecked, Body>,
}

impl Endpoint {
    pub(crate) fn new(services: &Services, id: u64) -> Arc<Self> {
        let activation_timeout =
            Duration::from_secs(services.config().services.activation_timeout_s);
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(OwnerChecked {
                connector,
                service: id,
            });
        Arc::new(Self {
            client,
            services: services.clone(),
            id,
            backends: Mutex::default(),
            turn: AtomicUsize::new(0),
            activity: services.activity(id),
            activation_timeout,
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn backends(&self, fresh: bool) -> Vec<Backend> {
        let mut cached = self.backends.lock().unwrap_or_else(|p| p.into_inner());
        match &*cached {
            Some((at, list)) if !fresh && at.elapsed() < BACKENDS_TTL => list.clone(),
            _ => {
                let list = self.services.backends(self.id);
                *cached = Some((Instant::now(), list.clone()));
                list
            }
        }
    }

    /// The replica for the next request (not `avoid`), counted in flight at once.
    fn choose(&self, avoid: Option<SocketAddr>, fresh: bool) -> Option<(SocketAddr, InFlight)> {
        let backends: Vec<Backend> = self
            .backends(fresh)
            .into_iter()
            .filter(|(_, addr, _)| Some(*addr) != avoid)
            .collect();
        let n = backends.len();
        if n == 0 {
            return None;
        }
        let turn = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        let (_, addr, count) = backends
            .into_iter()
            .enumerate()
            .min_by_key(|(i, (_, _, count))| (count.load(Ordering::Relaxed), (i + n - turn) % n))
            .map(|(_, b)| b)?;
        count.fetch_add(1, Ordering::Relaxed);
        Some((addr, InFlight(count)))
    }

    /// A replica for a request: one now, or, for a service scaled to zero, one started
    /// for it and waited for.
    async fn first_replica(&self) -> Option<(SocketAddr, InFlight)> {
        if let Some(c) = self.choose(None, false) {
            return Some(c);
        }
        let s = self.services.clone();
        let id = self.id;
        let may_come = tokio::task::spawn_blocking(move || s.activate(id))
            .await
            .unwrap_or(false);
        if !may_come {
            return None;
        }
        let deadline = Instant::now() + self.activation_timeout;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(c) = self.choose(None, true) {
                return Some(c);
            }
        }
        None
    }

    /// Forwards `req` to a replica and streams its answer back.
    pub(crate) async fn forward(&self, req: Request<Incoming>) -> Response<Body> {
        self.activity
            .store(gantry_controller::now_ms(), Ordering::Relaxed);
        let idempotent = matches!(
            *req.method(),
            hyper::Method::GET
                | hyper::Method::HEAD
                | hyper::Method::OPTIONS
                | hyper::Method::PUT
                | hyper::Method::DELETE
        );
        let (parts, body) = req.into_parts();
        let body: Body = if idempotent {
            match Limited::new(body, RETRY_BODY_MAX).collect().await {
                Ok(b) => Either::Right(Full::new(b.to_bytes())),
                Err(_) => {
                    return plain(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "payload-too-large",
                        "the body of a retried request may be at most 1 MiB",
                    );
                }
            }
        } else {
            Either::Left(body)
        };
        let Some((addr, in_flight)) = self.first_replica().await else {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "no healthy replica of this service",
            );
        };
        let again = match (&body, idempotent) {
            (Either::Right(full), true) => Some(full.clone()),
            _ => None,
        };
        let first = self
            .send(addr, Request::from_parts(parts.clone(), body))
            .await;
        drop(in_flight);
        let failure = match first {
            Ok(response) => return response.map(Either::Left),
            Err(e) => e,
        };
        tracing::debug!(service = self.id, %addr, "a replica failed a request: {failure}");
        // Another replica when there is one; else, after a pause, the same one again
        // (a refused connection can be a moment's: a busy replica's full backlog).
        let retry = match self.choose(Some(addr), true) {
            Some(other) => Some(other),
            None if again.is_some() => {
                tokio::time::sleep(RETRY_PAUSE).await;
                self.choose(None, true)
            }
            None => None,
        };
        if let Some(full) = again
            && let Some((other, in_flight)) = retry
        {
            let second = self
                .send(other, Request::from_parts(parts, Either::Right(full)))
                .await;
            drop(in_flight);
            match second {
                Ok(response) => return response.map(Either::Left),
                Err(e) => {
                    tracing::debug!(service = self.id, %other, "the retry failed too: {e}");
                }
            }
        }
        plain(
            StatusCode::BAD_GATEWAY,
            "bad-gateway",
            &format!("the replica failed: {failure}"),
        )
    }
}

impl Endpoint {
    /// Sends `req` to the replica at `addr` on a pooled connection; its answer's head.
    async fn send(
        &self,
        addr: SocketAddr,
        mut req: Request<Body>,
    ) -> Result<Response<Incoming>, String> {
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        *req.uri_mut() = format!("http://{addr}{path}")
            .parse()
            .map_err(|e| format!("bad path: {e}"))?;
        self.client.request(req).await.map_err(|e| {
            // The whole chain: hyper-util's own message says only "tcp connect error".
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        })
    }
}

/// Sends `req` to the replica of `service` at `addr` on a new connection (checked as the
/// endpoint's are: [`OwnerChecked`]); its answer's head.
pub(crate) async fn send(
    service: u64,
    addr: SocketAddr,
    req: Request<Body>,
) -> Result<Response<Incoming>, String> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    let client = stream.local_addr().map_err(|e| e.to_string())?;
    Services::verify_accepted(service, addr, client).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender.send_request(req).await.map_err(|e| e.to_string())
}

/// The endpoint's connector: hyper's, then the check that the socket which accepted the
/// connection is the replica's user's (`Services::verify_accepted`); a connection that
/// fails it is closed before a byte of the request is written.
#[derive(Clone)]
pub(crate) struct OwnerChecked {
    connector: HttpConnector,
    /// The service whose replicas it connects to.
    service: u64,
}

impl tower::Service<hyper::Uri> for OwnerChecked {
    type Response = TokioIo<tokio::net::TcpStream>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.connector.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: hyper::Uri) -> Self::Future {
        let connecting = self.connector.call(uri);
        let service = self.service;
        Box::pin(async move {
            let io = connecting.await?;
            let server = io.inner().peer_addr()?;
            let client = io.inner().local_addr()?;
            Services::verify_accepted(service, server, client).await?;
            Ok(io)
        })
    }
}

/// An answer of the endpoint's own, JSON as the API's errors are.
pub(super) fn plain(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({"error": {"code": code, "message": message}});
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(body.to_string()))));
    *response.status_mut() = status;
    response
}
