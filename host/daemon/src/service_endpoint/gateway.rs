//! The shared gateway (`[services] gateway = "IP:PORT"`): `/NAME/rest` goes to the
//! replicas of the service named NAME (not stopped) as `/rest`, through the same balancer
//! as its own endpoint. An unknown name is a 404; a name that several services bear is a
//! 409 naming them (their own endpoints still reach each).
//!
//! Owns: the gateway's listener and the path prefix. Does not own balancing (`forward.rs`).

use super::forward::{Body, Endpoint, plain};
use crate::scheduler::Scheduler;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Opens the gateway when one is configured (logged when it cannot).
pub fn open_gateway(s: &Scheduler) {
    let Some(addr) = s.config().services.gateway.clone() else {
        return;
    };
    let listener = match std::net::TcpListener::bind(&addr).and_then(|l| {
        l.set_nonblocking(true)?;
        Ok(l)
    }) {
        Ok(l) => l,
        Err(e) => return tracing::error!(%addr, "cannot open the services gateway: {e}"),
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return tracing::error!("the services gateway needs a runtime");
    };
    let gateway = Arc::new(Gateway {
        scheduler: s.clone(),
        endpoints: Mutex::default(),
    });
    let limit = Arc::new(tokio::sync::Semaphore::new(
        s.config().services.max_connections,
    ));
    let header_timeout = std::time::Duration::from_secs(s.config().http.header_read_timeout_s);
    tracing::info!(%addr, "services gateway listening");
    runtime.spawn(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return tracing::error!("cannot serve the services gateway");
        };
        super::serve(
            listener,
            limit,
            header_timeout,
            || true,
            move |req| {
                let gateway = gateway.clone();
                async move { gateway.route(req).await }
            },
        )
        .await;
    });
}

struct Gateway {
    scheduler: Scheduler,
    /// One balancer per service, made at its first request.
    endpoints: Mutex<HashMap<u64, Arc<Endpoint>>>,
}

impl Gateway {
    async fn route(&self, mut req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        let trimmed = path.trim_start_matches('/');
        let (name, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
        let ids: Vec<u64> = self
            .scheduler
            .services()
            .into_iter()
            .filter(|s| !s.stopped && s.name == name)
            .map(|s| s.id)
            .collect();
        let id = match ids.as_slice() {
            [id] => *id,
            [] => {
                return plain(
                    StatusCode::NOT_FOUND,
                    "not-found",
                    &format!("no service named {name:?}"),
                );
            }
            many => {
                return plain(
                    StatusCode::CONFLICT,
                    "ambiguous",
                    &format!("services {many:?} are all named {name:?}: use their own endpoints"),
                );
            }
        };
        let query = req
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        match format!("/{rest}{query}").parse() {
            Ok(uri) => *req.uri_mut() = uri,
            Err(_) => return plain(StatusCode::BAD_REQUEST, "invalid-path", "bad path"),
        }
        let endpoint = {
            let mut endpoints = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
            endpoints.retain(|_, e| self.scheduler.service(e.id()).is_some_and(|s| !s.stopped));
            endpoints
                .entry(id)
                .or_insert_with(|| Endpoint::new(&self.scheduler, id))
                .clone()
        };
        endpoint.forward(req).await
    }
}
