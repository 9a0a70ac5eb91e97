//! One stable endpoint per replicated service: a port on the controller (on the API's
//! address) where HTTP requests are balanced over the service's healthy replicas, the one
//! with the fewest requests in flight first, as a Kubernetes Service with a least-request
//! balancer. Responses stream through unchanged (chunked, server-sent events). A request
//! whose replica refuses the connection (it died) goes to another one, once, before any
//! byte of it was sent. No healthy replica: 503; a replica that fails mid-answer: 502.
//! Built on hyper (server and client connections), not hand-written HTTP.
//!
//! Owns: the listeners, the choice of replica, forwarding. Does not own which replicas
//! exist or are healthy (`scheduler/service_sets.rs`, the health checks).

use crate::scheduler::Scheduler;
use http_body_util::{Either, Full};
use hyper::body::Bytes;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Body = Either<Incoming, Full<Bytes>>;

/// How long a replica may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Opens the endpoint of every service not stopped (at the daemon's start).
pub fn open_all(s: &Scheduler) {
    for service in s.services().into_iter().filter(|s| !s.stopped) {
        open(s, service.id);
    }
}

/// Opens the endpoint of service `id` and records its port (logged when it cannot).
pub fn open(s: &Scheduler, id: u64) {
    let kept = s.service(id).and_then(|svc| svc.endpoint_port);
    match start(s, id, &s.config().listen, kept) {
        Ok(port) => {
            tracing::info!(service = id, port, "service endpoint listening");
            s.set_endpoint_port(id, port);
        }
        Err(e) => tracing::error!(service = id, "cannot open the service's endpoint: {e}"),
    }
}

/// Binds the endpoint of service `id` (its kept port when free, else a new one) on the
/// host of `listen`, and serves it until the service is stopped; the port bound.
fn start(s: &Scheduler, id: u64, listen: &str, kept: Option<u16>) -> std::io::Result<u16> {
    let ip = listen
        .parse::<SocketAddr>()
        .map_or_else(|_| [127, 0, 0, 1].into(), |a| a.ip());
    let listener = kept
        .and_then(|p| std::net::TcpListener::bind((ip, p)).ok())
        .map_or_else(|| std::net::TcpListener::bind((ip, 0)), Ok)?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let endpoint = Arc::new(Endpoint {
        scheduler: s.clone(),
        id,
        in_flight: Mutex::default(),
        turn: AtomicUsize::new(0),
    });
    let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    runtime.spawn(async move {
        match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => endpoint.serve(listener).await,
            Err(e) => tracing::error!(service = id, "cannot serve the endpoint: {e}"),
        }
    });
    Ok(port)
}

struct Endpoint {
    scheduler: Scheduler,
    id: u64,
    /// Requests in flight per replica job.
    in_flight: Mutex<HashMap<u64, Arc<AtomicUsize>>>,
    /// Turns among replicas with as many requests in flight.
    turn: AtomicUsize,
}

impl Endpoint {
    async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = tokio::time::sleep(Duration::from_secs(1)) => {
                    if self.scheduler.service(self.id).is_none_or(|s| s.stopped) {
                        tracing::info!(service = self.id, "endpoint closed: the service stopped");
                        return;
                    }
                    continue;
                }
            };
            let Ok((stream, _)) = accepted else {
                continue;
            };
            let me = self.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| me.clone().forward(req));
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(e) = conn.await {
                    tracing::debug!("endpoint connection ended: {e}");
                }
            });
        }
    }

    /// The replicas to try, fewest requests in flight first, with their counters.
    fn candidates(&self) -> Vec<(SocketAddr, Arc<AtomicUsize>)> {
        let backends = self.scheduler.service_backends(self.id);
        let mut counts = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        counts.retain(|job, _| backends.iter().any(|(j, _)| j == job));
        let n = backends.len().max(1);
        let turn = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        let mut out: Vec<(usize, SocketAddr, Arc<AtomicUsize>)> = backends
            .into_iter()
            .enumerate()
            .map(|(i, (job, addr))| {
                (
                    (i + n - turn) % n,
                    addr,
                    counts.entry(job).or_default().clone(),
                )
            })
            .collect();
        out.sort_by_key(|(order, _, count)| (count.load(Ordering::Relaxed), *order));
        out.into_iter()
            .map(|(_, addr, count)| (addr, count))
            .collect()
    }

    async fn forward(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        let candidates = self.candidates();
        if candidates.is_empty() {
            return Ok(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "no healthy replica of this service",
            ));
        }
        let idempotent = matches!(
            *req.method(),
            hyper::Method::GET | hyper::Method::HEAD | hyper::Method::OPTIONS
        );
        let tries = if idempotent { 2 } else { 1 };
        for (addr, count) in candidates.into_iter().take(tries) {
            let connected =
                tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await;
            let Ok(Ok(stream)) = connected else {
                tracing::debug!(service = self.id, %addr, "a replica refused the connection");
                continue;
            };
            let Ok((mut sender, conn)) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
            else {
                continue;
            };
            tokio::spawn(async move {
                let _ = conn.await;
            });
            count.fetch_add(1, Ordering::Relaxed);
            let answer = sender.send_request(req).await;
            count.fetch_sub(1, Ordering::Relaxed);
            return Ok(match answer {
                Ok(response) => response.map(Either::Left),
                Err(e) => plain(StatusCode::BAD_GATEWAY, &format!("the replica failed: {e}")),
            });
        }
        Ok(plain(
            StatusCode::BAD_GATEWAY,
            "no replica of this service accepted the connection",
        ))
    }
}

fn plain(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({"error": {"code": "bad-gateway", "message": message}});
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(body.to_string()))));
    *response.status_mut() = status;
    response
}
