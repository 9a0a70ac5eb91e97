//! The shared gateway (`[services] gateway = "IP:PORT"`): a route names a service and the
//! rest of the path goes to its replicas (not stopped), through the same balancer as its own
//! endpoint. Names on the gateway belong to someone (issue 43, finding 10):
//!
//! - `/~USER/NAME/rest` reaches the service named NAME of user USER, as `/rest`: no other
//!   user's service can ever take it (as a Kubernetes Service is named within its namespace).
//! - `/NAME/rest` reaches the service named NAME of the user whose live service of that name
//!   is the oldest (its first live owner): another user's service of the same name never
//!   takes the route, nor makes it ambiguous; it passes to another user only once every
//!   service of that name of its owner has stopped.
//!
//! An unknown name is a 404; a name that several live services of the one owner bear is a
//! 409 naming them (their own endpoints still reach each).
//!
//! Owns: the gateway's listener, the path prefix and who a name belongs to. Does not own
//! balancing (`forward.rs`).

use super::forward::{Body, Endpoint, plain};
use gantry_controller::Services;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Opens the gateway when one is configured (logged when it cannot).
pub fn open_gateway(s: &Services) {
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
        services: s.clone(),
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
    services: Services,
    /// One balancer per service, made at its first request.
    endpoints: Mutex<HashMap<u64, Arc<Endpoint>>>,
}

impl Gateway {
    async fn route(&self, mut req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        let Some(Route { user, name, rest }) = Route::parse(&path) else {
            return plain(
                StatusCode::NOT_FOUND,
                "not-found",
                "a gateway path is /NAME/... or /~USER/NAME/...",
            );
        };
        let live: Vec<(u64, String, String)> = self
            .services
            .list()
            .into_iter()
            .filter(|s| !s.stopped)
            .map(|s| (s.id, s.name, s.template.user))
            .collect();
        let id = match owned(&live, user, name).as_slice() {
            [id] => *id,
            [] => {
                let whose = user.map_or_else(String::new, |u| format!(" of user {u:?}"));
                return plain(
                    StatusCode::NOT_FOUND,
                    "not-found",
                    &format!("no service named {name:?}{whose}"),
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
            endpoints.retain(|_, e| self.services.get(e.id()).is_some_and(|s| !s.stopped));
            endpoints
                .entry(id)
                .or_insert_with(|| Endpoint::new(&self.services, id))
                .clone()
        };
        endpoint.forward(req).await
    }
}

/// A gateway path: `/~USER/NAME/rest` or `/NAME/rest`.
#[derive(Debug, PartialEq, Eq)]
struct Route<'a> {
    user: Option<&'a str>,
    name: &'a str,
    rest: &'a str,
}

impl<'a> Route<'a> {
    fn parse(path: &'a str) -> Option<Self> {
        let trimmed = path.trim_start_matches('/');
        let (first, after) = trimmed.split_once('/').unwrap_or((trimmed, ""));
        let route = match first.strip_prefix('~') {
            Some(user) => {
                let (name, rest) = after.split_once('/').unwrap_or((after, ""));
                Route {
                    user: Some(user),
                    name,
                    rest,
                }
            }
            None => Route {
                user: None,
                name: first,
                rest: after,
            },
        };
        let empty = route.name.is_empty() || route.user.is_some_and(str::is_empty);
        (!empty).then_some(route)
    }
}

/// The live services (id, name, user) a route reaches: those named `name` of `user`, or,
/// without one, those named `name` of the owner of the oldest live service of that name.
fn owned(live: &[(u64, String, String)], user: Option<&str>, name: &str) -> Vec<u64> {
    let named = || live.iter().filter(|(_, n, _)| n == name);
    let owner = match user {
        Some(u) => u.to_string(),
        None => match named().min_by_key(|(id, _, _)| *id) {
            Some((_, _, first)) => first.clone(),
            None => return Vec::new(),
        },
    };
    named()
        .filter(|(_, _, u)| *u == owner)
        .map(|(id, _, _)| *id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_with_and_without_an_owner() {
        let r = |user, name, rest| Some(Route { user, name, rest });
        assert_eq!(Route::parse("/llama/v1/x"), r(None, "llama", "v1/x"));
        assert_eq!(Route::parse("/llama"), r(None, "llama", ""));
        assert_eq!(
            Route::parse("/~bob/llama/v1"),
            r(Some("bob"), "llama", "v1")
        );
        assert_eq!(Route::parse("/~bob/llama"), r(Some("bob"), "llama", ""));
        assert_eq!(Route::parse("/"), None);
        assert_eq!(Route::parse("/~bob"), None);
        assert_eq!(Route::parse("/~/llama"), None);
    }

    #[test]
    fn a_name_belongs_to_its_first_live_owner_and_to_each_user_under_their_own() {
        let svc = |id: u64, name: &str, user: &str| (id, name.to_string(), user.to_string());
        let live = vec![
            svc(3, "llama", "bob"),
            svc(5, "llama", "mallory"),
            svc(7, "other", "mallory"),
        ];
        assert_eq!(
            owned(&live, None, "llama"),
            vec![3],
            "mallory never takes it"
        );
        assert_eq!(owned(&live, Some("mallory"), "llama"), vec![5]);
        assert_eq!(owned(&live, Some("bob"), "llama"), vec![3]);
        assert!(owned(&live, Some("bob"), "other").is_empty());
        assert!(owned(&live, None, "none").is_empty());
        let two = vec![
            svc(3, "llama", "bob"),
            svc(4, "llama", "bob"),
            svc(5, "llama", "eve"),
        ];
        assert_eq!(
            owned(&two, None, "llama"),
            vec![3, 4],
            "one owner's two: a 409"
        );
        let after = vec![svc(5, "llama", "mallory")];
        assert_eq!(
            owned(&after, None, "llama"),
            vec![5],
            "passes on once bob's stopped"
        );
    }
}
