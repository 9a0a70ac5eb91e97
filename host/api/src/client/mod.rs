//! The typed client of the daemon's API (feature `client`): one blocking HTTP call per
//! method, over TCP (`http://HOST:PORT`), TLS (`https://`, with the trust roots the caller
//! gives) or the daemon's Unix socket (`unix:PATH`, where the kernel names the caller). With a
//! token every request carries `Authorization: Bearer <token>`. Answers are read into the
//! types of this crate (`routes.rs`); a refusal becomes [`Error::Api`] with the daemon's
//! code, message and field.
//!
//! Several controllers of one cluster (`http://a:8420,http://b:8420`): the client asks each
//! `GET /v1/health` once and talks to the one that says it leads (the first, when none
//! does: its answers then say `not-leader` and why).
//!
//! Owns: the transport (`unix.rs`), requests and answers, error mapping. Does not own the
//! routes' behaviour (the daemon's `api`), reading certificate files (the caller passes a
//! `ureq` TLS config) or how answers are printed (the CLI).

mod error;
mod policy_routes;
mod routes;
mod unix;

pub use error::Error;
pub use unix::{UnixConnector, UnixTransport};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io::Read;

/// What a call returns.
pub type Result<T> = std::result::Result<T, Error>;

/// A client for one daemon.
#[derive(Debug)]
pub struct Client {
    base: String,
    /// The server as given (`unix:PATH` or the URL), for messages.
    label: String,
    agent: ureq::Agent,
    token: Option<String>,
}

impl Client {
    /// A client for `server` (`unix:PATH` or a URL such as `http://127.0.0.1:8420`); an
    /// `https://` server must have a certificate from a public CA.
    pub fn new(server: &str) -> Self {
        Self::with_tls(
            server,
            ureq::tls::TlsConfig::builder()
                .provider(ureq::tls::TlsProvider::Rustls)
                .build(),
        )
    }

    /// A client for `server` that verifies `https://` servers with `tls` (e.g. trusting only
    /// a private CA; the daemon's `tls::ureq_tls` builds one from `--ca-cert`).
    pub fn with_tls(server: &str, tls: ureq::tls::TlsConfig) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .tls_config(tls)
            .build();
        if let Some(path) = server.strip_prefix("unix:") {
            return Self {
                // The host is only the request's `Host` header; the socket is the address.
                base: "http://localhost".into(),
                label: server.to_string(),
                agent: ureq::Agent::with_parts(
                    config,
                    UnixConnector::new(path.into()),
                    ureq::unversioned::resolver::DefaultResolver::default(),
                ),
                token: None,
            };
        }
        let agent = ureq::Agent::new_with_config(config);
        let servers: Vec<&str> = server
            .split(',')
            .map(|s| s.trim().trim_end_matches('/'))
            .filter(|s| !s.is_empty())
            .collect();
        let base = match servers.as_slice() {
            [one] => one.to_string(),
            [] => server.to_string(),
            several => leader_of(&agent, several),
        };
        Self {
            label: base.clone(),
            base,
            agent,
            token: None,
        }
    }

    /// The same client, sending `token` with every request; over the Unix socket never (the
    /// kernel names the caller there, and a token sent to a socket someone else planted
    /// would be theirs).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        if !self.label.starts_with("unix:") {
            self.token = token;
        }
        self
    }

    /// Whether requests carry a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The server as given (`unix:PATH` or the URL).
    pub fn server(&self) -> &str {
        &self.label
    }

    fn req<B>(&self, r: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => r.header("authorization", format!("Bearer {t}")),
            None => r,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The answer's body as JSON (or a JSON string of its text when it is not JSON), or the
    /// refusal as [`Error::Api`].
    fn finish(
        &self,
        resp: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value> {
        let mut resp = resp.map_err(|e| self.unreachable(e))?;
        let status = resp.status();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            return Ok(body);
        }
        let e = body.get("error");
        let text_of = |key: &str| e.and_then(|e| e.get(key)).and_then(Value::as_str);
        Err(Error::Api {
            status: status.as_u16(),
            code: text_of("code").unwrap_or("error").to_string(),
            message: text_of("message").map_or_else(|| body.to_string(), str::to_string),
            field: text_of("field").map(str::to_string),
        })
    }

    /// Why a request got no answer; TLS failures say so plainly.
    fn unreachable(&self, e: ureq::Error) -> Error {
        let server = self.label.clone();
        match tls_failure(&e) {
            Some(rustls::Error::InvalidCertificate(why)) => Error::Certificate {
                server,
                problem: certificate_problem(why),
            },
            Some(other) => Error::Handshake {
                server,
                message: other.to_string(),
            },
            None if closed_while_sending(&e) => Error::ClosedWhileSending {
                server,
                source: Box::new(e),
            },
            None if matches!(e, ureq::Error::Protocol(_)) && server.starts_with("http://") => {
                Error::NotHttp {
                    server,
                    source: Box::new(e),
                }
            }
            None => Error::Unreachable {
                server,
                source: Box::new(e),
            },
        }
    }

    pub(crate) fn decode<T: DeserializeOwned>(path: &str, v: Value) -> Result<T> {
        serde_json::from_value(v).map_err(|source| Error::Decode {
            path: path.to_string(),
            source,
        })
    }

    /// GET a path, its answer as JSON (for answers shown as they are).
    pub fn get_json(&self, path: &str) -> Result<Value> {
        self.finish(self.req(self.agent.get(self.url(path))).call())
    }

    /// GET a path, its answer as JSON with the value of response header `header`, if any.
    pub fn get_json_with_header(
        &self,
        path: &str,
        header: &str,
    ) -> Result<(Value, Option<String>)> {
        let resp = self
            .req(self.agent.get(self.url(path)))
            .call()
            .map_err(|e| self.unreachable(e))?;
        let value = resp
            .headers()
            .get(header)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Ok((self.finish(Ok(resp))?, value))
    }

    /// GET a path, its answer as `T`.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        Self::decode(path, self.get_json(path)?)
    }

    /// GET a path as text.
    pub fn get_text(&self, path: &str) -> Result<String> {
        match self.get_json(path)? {
            Value::String(s) => Ok(s),
            v => Ok(v.to_string()),
        }
    }

    /// POST `body` as JSON, the answer as JSON.
    pub fn post_json<B: Serialize + ?Sized>(&self, path: &str, body: &B) -> Result<Value> {
        self.finish(self.req(self.agent.post(self.url(path))).send_json(body))
    }

    /// POST `body` as JSON, the answer as `T`.
    pub fn post<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        Self::decode(path, self.post_json(path, body)?)
    }

    /// PUT `body` as JSON, the answer as JSON.
    pub fn put_json<B: Serialize + ?Sized>(&self, path: &str, body: &B) -> Result<Value> {
        self.finish(self.req(self.agent.put(self.url(path))).send_json(body))
    }

    /// PATCH `body` as JSON, the answer decoded as `T`.
    pub fn patch<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        let v = self.finish(self.req(self.agent.patch(self.url(path))).send_json(body))?;
        Self::decode(path, v)
    }

    /// DELETE, the answer as JSON.
    pub fn delete_json(&self, path: &str) -> Result<Value> {
        self.finish(self.req(self.agent.delete(self.url(path))).call())
    }

    /// POST raw bytes (`application/wasm`), the answer as JSON.
    pub fn post_bytes_json(&self, path: &str, bytes: &[u8]) -> Result<Value> {
        self.finish(
            self.req(self.agent.post(self.url(path)))
                .header("content-type", "application/wasm")
                .send(bytes),
        )
    }

    /// GET a streaming answer (e.g. `/attach`); the reader yields the body as it arrives.
    pub fn stream(&self, path: &str) -> Result<Box<dyn Read + Send>> {
        let resp = self
            .req(self.agent.get(self.url(path)))
            .call()
            .map_err(|e| self.unreachable(e))?;
        if !resp.status().is_success() {
            self.finish(Ok(resp))?;
            return Err(Error::Unexpected);
        }
        Ok(Box::new(resp.into_body().into_reader()))
    }
}

/// The rustls error behind a failed request, if TLS is what failed.
/// The first of `servers` whose `/v1/health` says it leads (a standby says `standby`; a
/// controller alone says nothing of leadership and counts as leading), else the first.
fn leader_of(agent: &ureq::Agent, servers: &[&str]) -> String {
    let leads = |server: &str| -> bool {
        let answer = agent
            .get(format!("{server}/v1/health"))
            .config()
            .timeout_global(Some(std::time::Duration::from_secs(3)))
            .build()
            .call();
        let Ok(mut answer) = answer else { return false };
        let Ok(body) = answer.body_mut().read_json::<Value>() else {
            return false;
        };
        body["status"] == "ok"
            && (body["leadership"].is_null() || body["leadership"]["role"] == "leader")
    };
    servers
        .iter()
        .find(|s| leads(s))
        .unwrap_or(&servers[0])
        .to_string()
}

fn tls_failure(e: &ureq::Error) -> Option<&rustls::Error> {
    match e {
        ureq::Error::Rustls(r) => Some(r),
        ureq::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>(),
        _ => None,
    }
}

/// Why a certificate was refused, in words for the common cases.
fn certificate_problem(why: &rustls::CertificateError) -> String {
    let text = why.to_string();
    match why {
        rustls::CertificateError::UnknownIssuer => {
            "it is not signed by a CA this client trusts (unknown issuer)".into()
        }
        _ if text.contains("CaUsedAsEndEntity") => {
            "it is a CA certificate (basicConstraints CA:TRUE) used as the server's own; make the self-signed certificate with CA:FALSE, or sign a server certificate with that CA".into()
        }
        _ => text,
    }
}

/// `text` percent-encoded for one URL path segment or query value (bytes outside
/// `A-Za-z0-9-._~` become `%XX`).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// Whether a request failed because the daemon closed the connection while it was written
/// (a broken pipe or a reset while sending a body).
fn closed_while_sending(e: &ureq::Error) -> bool {
    matches!(e, ureq::Error::Io(io) if matches!(
        io.kind(),
        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
    ))
}
