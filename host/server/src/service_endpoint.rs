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
//! An endpoint's port is kept across controller restarts and never moved: while another
//! process holds it the endpoint stays closed, says why and takes it back once free (`hold`).
//!
//! Owns: the per-service listeners (their settings: `config_services.rs`). Does not own which replicas exist or
//! are ready (`gantry_controller`'s `service_sets.rs`, the health checks).

mod forward;
mod gateway;

pub(crate) use forward::{Endpoint, send};
pub use gateway::open_gateway;

use gantry_controller::Services;
use gantry_node::port_owner;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Opens the endpoint of every service not stopped, and the gateway (at the daemon's start).
pub fn open_all(s: &Services) {
    for service in s.list().into_iter().filter(|s| !s.stopped) {
        open(s, service.id);
    }
    open_gateway(s);
}

/// Opens the endpoint of service `id` and records its port (logged when it cannot). A kept
/// port is never given up for another one: while another process holds it (a controller
/// restarted while someone else bound it), the endpoint stays closed, the service's view
/// says why (`endpoint_problem`) and one event names the holder; the port is tried again
/// every [`REBIND_PERIOD`] until it is free or the service stops (issue 43, finding 9).
pub fn open(s: &Services, id: u64) {
    let kept = s.get(id).and_then(|svc| svc.endpoint_port);
    let ip = endpoint_ip(&s.config().listen);
    let bound = std::net::TcpListener::bind((ip, kept.unwrap_or(0)));
    match bound.and_then(|l| start(s, id, l)) {
        Ok(port) => {
            tracing::info!(service = id, port, "service endpoint listening");
            s.set_endpoint_port(id, port);
        }
        Err(e) => match kept {
            Some(port) => hold(s, id, ip, port, &e),
            None => tracing::error!(service = id, "cannot open the service's endpoint: {e}"),
        },
    }
}

/// How often a kept endpoint port that another process holds is tried again.
const REBIND_PERIOD: Duration = Duration::from_secs(1);

/// The address endpoints listen on: the API's, or 127.0.0.1.
fn endpoint_ip(listen: &str) -> IpAddr {
    listen
        .parse::<SocketAddr>()
        .map_or_else(|_| [127, 0, 0, 1].into(), |a| a.ip())
}

/// Keeps service `id`'s endpoint on `port`, which cannot be bound now (`error`): says so on
/// the service and in an event naming who listens there, then binds it once it is free.
fn hold(s: &Services, id: u64, ip: IpAddr, port: u16, error: &std::io::Error) {
    let holders = port_owner::listeners(port);
    let problem = format!(
        "its port {port} cannot be bound ({error}); listening there: uid {holders:?}. \
         The service keeps this port and its endpoint stays closed until it is free"
    );
    tracing::warn!(service = id, "endpoint: {problem}");
    s.set_endpoint_problem(id, Some(problem.clone()));
    s.event(id, format!("endpoint closed: {problem}"));
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let services = s.clone();
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(REBIND_PERIOD).await;
            if services.get(id).is_none_or(|svc| svc.stopped) {
                services.set_endpoint_problem(id, None);
                return;
            }
            let Ok(listener) = std::net::TcpListener::bind((ip, port)) else {
                continue;
            };
            match start(&services, id, listener) {
                Ok(_) => {
                    services.set_endpoint_problem(id, None);
                    services.event(id, format!("endpoint listening on its port {port} again"));
                }
                Err(e) => tracing::error!(service = id, "cannot serve the endpoint: {e}"),
            }
            return;
        }
    });
}

/// Serves the endpoint of service `id` on `listener` until the service is stopped; the
/// port.
fn start(s: &Services, id: u64, listener: std::net::TcpListener) -> std::io::Result<u16> {
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let endpoint = Endpoint::new(s, id);
    let limit = Arc::new(tokio::sync::Semaphore::new(
        s.config().services.max_connections,
    ));
    let header_timeout = Duration::from_secs(s.config().http.header_read_timeout_s);
    let services = s.clone();
    let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    runtime.spawn(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => return tracing::error!(service = id, "cannot serve the endpoint: {e}"),
        };
        let open = move || services.get(id).is_some_and(|s| !s.stopped);
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
