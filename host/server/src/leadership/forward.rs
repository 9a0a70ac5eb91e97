//! A standby's answer to the API: every request but `GET /v1/health` is passed to the
//! leader as it came (method, path, query, headers with the caller's `Authorization`,
//! body streamed) and the leader's answer comes back as it is written, server-sent events
//! and `attach` streams included; the answer carries `X-Gantry-Leader: URL`. So a client
//! given one controller's address reads and writes wherever it points, as with
//! Kubernetes' API servers behind one name.
//!
//! What is not passed on gets the 503 `not-leader` body (`super::not_leader`):
//! - the agents' routes (`/cluster/...`): an agent moves on to the leader itself, and its
//!   term checks need it to talk to the leader directly;
//! - `/metrics`: a scraper of this address would count the leader's series twice;
//! - a request another standby already forwarded (`X-Gantry-Forwarded-By`), so a stale
//!   view of who leads cannot make a loop;
//! - any request while nobody leads, or when the leader cannot be reached.
//!
//! The leader judges the caller by the token the request carries, as if it had come
//! directly: a standby adds no proof of identity. Requests reach the leader from the
//! standby's address, so the leader's per-caller limits count them as the standby's.
//!
//! Owns: the forwarding. Does not own who leads (`super`) or the standby's server
//! (`gantry_http`).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderName, HeaderValue, Uri, header};
use hyper_util::rt::TokioIo;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long the leader may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the leader may take to begin its answer (a stream then runs as long as it does).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// Set on a forwarded request to the name of the standby that forwarded it.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static("x-gantry-forwarded-by");
/// Set on a forwarded answer to the leader's URL.
pub const LEADER: HeaderName = HeaderName::from_static("x-gantry-leader");

/// Headers of one connection, never passed on (RFC 9110, section 7.6.1).
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Passes a standby's requests to the leader.
#[derive(Clone)]
pub struct Forwarder {
    name: String,
    /// `[cluster] ca_cert`: whom to trust when the leader serves HTTPS (the web's roots
    /// when unset), as when the controller dials agents.
    ca_cert: Option<PathBuf>,
    tls: Arc<OnceLock<Result<Arc<rustls::ClientConfig>, String>>>,
}

/// Why a request was not forwarded.
#[derive(Debug, thiserror::Error)]
pub enum NotForwarded {
    /// The route is answered by the leader only (agents, metrics) or came from a standby.
    #[error("{0}")]
    NotHere(&'static str),
    /// The leader did not take the request.
    #[error("the leader at {url} cannot be reached: {message}")]
    Unreachable {
        /// The leader.
        url: String,
        /// What went wrong.
        message: String,
    },
}

impl Forwarder {
    /// A forwarder for the standby `name`, trusting `ca_cert` for an HTTPS leader.
    pub fn new(name: String, ca_cert: Option<PathBuf>) -> Self {
        Self {
            name,
            ca_cert,
            tls: Arc::default(),
        }
    }

    fn tls(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.tls
            .get_or_init(|| {
                gantry_config::tls::client_config(self.ca_cert.as_deref())
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    /// Passes `request` to the leader at `leader` and returns its answer.
    pub async fn forward(&self, leader: &str, request: Request) -> Result<Response, NotForwarded> {
        let path = request.uri().path();
        if path.starts_with("/cluster/") {
            return Err(NotForwarded::NotHere(
                "agents talk to the leader itself: this controller stands by",
            ));
        }
        if path == "/metrics" {
            return Err(NotForwarded::NotHere(
                "a standby has no metrics of its own: scrape the leader",
            ));
        }
        if request.headers().contains_key(FORWARDED_BY) {
            return Err(NotForwarded::NotHere(
                "another standby forwarded this request, and this controller stands by too",
            ));
        }
        let unreachable = |message: String| NotForwarded::Unreachable {
            url: leader.to_string(),
            message,
        };
        let target: Uri = leader
            .parse()
            .map_err(|e| unreachable(format!("its URL is not valid: {e}")))?;
        let host = target
            .host()
            .ok_or_else(|| unreachable("its URL has no host".into()))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let https = target.scheme_str() == Some("https");
        let port = target.port_u16().unwrap_or(if https { 443 } else { 80 });
        let authority = target
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_else(|| host.clone());
        let request = self.rewrite(request, target.path(), &authority)?;
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        .map_err(|_| unreachable("it did not accept a connection within 3 s".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let answer = if https {
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| unreachable(format!("{host} is not a TLS server name: {e}")))?;
            let tls = tokio_rustls::TlsConnector::from(self.tls().map_err(unreachable)?)
                .connect(name, tcp)
                .await
                .map_err(|e| unreachable(format!("TLS: {e}")))?;
            send(tls, request).await
        } else {
            send(tcp, request).await
        }
        .map_err(unreachable)?;
        let mut answer = answer.map(Body::new);
        if let Ok(value) = HeaderValue::from_str(leader) {
            answer.headers_mut().insert(LEADER, value);
        }
        Ok(answer.into_response())
    }

    /// The request as the leader gets it: its path under the leader's URL, `Host` the
    /// leader's, no hop-by-hop headers, and who forwarded it.
    fn rewrite(
        &self,
        request: Request,
        base: &str,
        authority: &str,
    ) -> Result<Request, NotForwarded> {
        let (mut parts, body) = request.into_parts();
        let wanted = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let path = format!("{}{wanted}", base.trim_end_matches('/'));
        parts.uri = path.parse().map_err(|e| NotForwarded::Unreachable {
            url: authority.to_string(),
            message: format!("cannot name {path}: {e}"),
        })?;
        for name in HOP_BY_HOP {
            parts.headers.remove(name);
        }
        let host = HeaderValue::from_str(authority).map_err(|e| NotForwarded::Unreachable {
            url: authority.to_string(),
            message: e.to_string(),
        })?;
        parts.headers.insert(header::HOST, host);
        if let Ok(name) = HeaderValue::from_str(&self.name) {
            parts.headers.insert(FORWARDED_BY, name);
        }
        parts.version = http::Version::HTTP_11;
        Ok(Request::from_parts(parts, body))
    }
}

/// Sends `request` over a new HTTP/1.1 connection on `io`; the connection lives on its own
/// task as long as the answer's body streams.
async fn send<T>(io: T, request: Request) -> Result<http::Response<hyper::body::Incoming>, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("a forwarded request's connection to the leader ended: {e}");
        }
    });
    tokio::time::timeout(ANSWER_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| "it did not begin to answer within 60 s".to_string())?
        .map_err(|e| e.to_string())
}

/// The standby's fallback route: forwards to the leader, or says why not.
pub async fn to_leader(State(forwarder): State<Forwarder>, request: Request) -> Response {
    let Some(leader) = super::status().and_then(|s| s.leader) else {
        return super::not_leader(None).await;
    };
    match forwarder.forward(&leader.url, request).await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::debug!("standby: not forwarded: {e}");
            super::not_leader(Some(e.to_string())).await
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn request(path: &str) -> Request {
        http::Request::builder()
            .uri(path)
            .header(header::AUTHORIZATION, "Bearer alice-token")
            .header(header::HOST, "standby.example:8080")
            .header(header::CONNECTION, "keep-alive, x-secret")
            .header(header::TRANSFER_ENCODING, "chunked")
            .header(header::UPGRADE, "websocket")
            .header("x-request-id", "r1")
            .body(Body::empty())
            .unwrap()
    }

    #[test]
    fn a_forwarded_request_keeps_the_callers_proof_and_nothing_of_its_connection() {
        let f = Forwarder::new("ctl-b".into(), None);
        let r = f
            .rewrite(request("/v1/jobs?state=running"), "/", "10.0.0.1:8080")
            .unwrap();
        assert_eq!(r.uri(), "/v1/jobs?state=running");
        let h = r.headers();
        // The leader judges the caller by the token it sent, nothing else.
        assert_eq!(h[header::AUTHORIZATION], "Bearer alice-token");
        assert_eq!(h[header::HOST], "10.0.0.1:8080");
        assert_eq!(h[FORWARDED_BY], "ctl-b");
        assert_eq!(h["x-request-id"], "r1");
        for gone in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
        ] {
            assert!(!h.contains_key(&gone), "{gone} passed on");
        }
        // A leader URL with a path prefix keeps it.
        let r = f.rewrite(request("/v1/nodes"), "/gantry/", "lb").unwrap();
        assert_eq!(r.uri(), "/gantry/v1/nodes");
    }

    #[tokio::test]
    async fn agents_metrics_and_forwarded_requests_are_not_passed_on() {
        let f = Forwarder::new("ctl-b".into(), None);
        for path in ["/cluster/v1/heartbeat", "/metrics"] {
            let refused = f.forward("http://127.0.0.1:9", request(path)).await;
            assert!(matches!(refused, Err(NotForwarded::NotHere(_))), "{path}");
        }
        let mut again = request("/v1/jobs");
        again
            .headers_mut()
            .insert(FORWARDED_BY, HeaderValue::from_static("ctl-c"));
        assert!(matches!(
            f.forward("http://127.0.0.1:9", again).await,
            Err(NotForwarded::NotHere(_))
        ));
        // A leader that does not listen: said, with its URL.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        match f.forward(&url, request("/v1/jobs")).await {
            Err(e @ NotForwarded::Unreachable { .. }) => {
                assert!(e.to_string().contains(&url), "{e}");
            }
            other => panic!("{:?}", other.map(|r| r.status())),
        }
    }
}
