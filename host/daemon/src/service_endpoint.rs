//! One stable endpoint per replicated service: a port on the controller (on the API's
//! address), kept across restarts, where HTTP requests are balanced over the service's
//! ready replicas (`forward.rs`), as a Kubernetes Service with a least-request balancer;
//! and, when `[services] gateway` is set, one shared port where `/NAME/...` goes to
//! service NAME with the prefix taken off (`gateway.rs`). Built on hyper (server and
//! client connections), not hand-written HTTP. Each listener takes at most
//! `services.max_connections` connections at once (more wait in the kernel's backlog), and
//! a client has the API's `[http] header_read_timeout_s` to send a request's headers, on a
//! new connection and between requests on a kept-alive one, as on the API's port.
//!
//! Owns: the per-service listeners (their settings: `config_services.rs`). Does not own which replicas exist or
//! are ready (`scheduler/service_sets.rs`, the health checks).

mod forward;
mod gateway;

pub(crate) use forward::{Endpoint, send};
pub use gateway::open_gateway;

use crate::scheduler::Scheduler;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Opens the endpoint of every service not stopped, and the gateway (at the daemon's start).
pub fn open_all(s: &Scheduler) {
    for service in s.services().into_iter().filter(|s| !s.stopped) {
        open(s, service.id);
    }
    open_gateway(s);
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
    let endpoint = Endpoint::new(s, id);
    let limit = Arc::new(tokio::sync::Semaphore::new(
        s.config().services.max_connections,
    ));
    let header_timeout = Duration::from_secs(s.config().http.header_read_timeout_s);
    let scheduler = s.clone();
    let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    runtime.spawn(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => return tracing::error!(service = id, "cannot serve the endpoint: {e}"),
        };
        let open = move || scheduler.service(id).is_some_and(|s| !s.stopped);
        serve(listener, limit, header_timeout, open, move |req| {
            let endpoint = endpoint.clone();
            async move { endpoint.forward(req).await }
        })
        .await;
        tracing::info!(service = id, "endpoint closed: the service stopped");
    });
    Ok(port)
}

/// Accepts connections on `listener` (at most `limit` at once, each with `header_timeout`
/// to send a request's headers) and answers each request with `handle`, until `open` says
/// no (asked once a second).
async fn serve<H, F>(
    listener: tokio::net::TcpListener,
    limit: Arc<tokio::sync::Semaphore>,
    header_timeout: Duration,
    open: impl Fn() -> bool,
    handle: H,
) where
    H: Fn(hyper::Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = hyper::Response<forward::Body>> + Send + 'static,
{
    loop {
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if !open() {
                    return;
                }
                continue;
            }
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let answer = handle(req);
                async move { Ok::<_, std::convert::Infallible>(answer.await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("endpoint connection ended: {e}");
            }
            drop(permit);
        });
    }
}
