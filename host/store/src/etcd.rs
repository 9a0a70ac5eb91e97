//! A small client of etcd v3 through its JSON gateway (`POST /v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/grant|keepalive|revoke`: etcd's documented HTTP API, served on the client
//! port by every member since 3.4): keys and values travel in base64, integers as strings.
//! The gRPC client crates need `protoc` to build, which the README's first command must not
//! need; these few calls are all Gantry makes.
//!
//! Every call goes to the endpoint that answered last, and on a connection failure or a
//! 5xx to the next, so a dead member costs one failed attempt, not an outage. TLS with a
//! CA and a client certificate when configured (`[store]` `ca`, `cert`, `key`); etcd's
//! users when configured (`[store]` `username` and a password from a private file or the
//! environment): the client logs in (`/v3/auth/authenticate`) before its first call and
//! again when etcd says its token is no longer valid, and sends the token with every call.
//! [`accepts_anonymous`] asks whether the members answer a client with no credentials at
//! all (issue 43, finding 13: such an etcd lets any local process read every job and name
//! the leader).
//!
//! Owns: the requests, their encoding, endpoint failover. Does not own what keys mean
//! (`state_etcd.rs`, `election.rs`).

use crate::StoreError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod auth;
use auth::is_auth_error;
pub use auth::{LoginError, accepts_anonymous};

/// How long one request may take (a member that hangs is given up on for the next).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Where etcd is and how to reach it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs of the members (`http://127.0.0.1:2379`, or `https://` with TLS).
    pub endpoints: Vec<String>,
    /// Key prefix of this cluster's state (default `/gantry/`).
    pub prefix: String,
    /// CA certificate (PEM) that signed the members' certificates.
    pub ca: Option<PathBuf>,
    /// Client certificate (PEM), with `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// An etcd user to log in as (with `password`).
    pub username: Option<String>,
    /// That user's password (read from a private file or the environment, never from a
    /// configuration file others may read).
    pub password: Option<Password>,
}

/// A password that never shows in `Debug` output.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(hidden)")
    }
}

impl EtcdConfig {
    /// Whether the client proves who it is: a client certificate or a user and password.
    pub fn has_credentials(&self) -> bool {
        self.cert.is_some() || self.username.is_some()
    }

    /// The same members and CA with no credentials at all: what any local process could
    /// present.
    pub fn anonymous(&self) -> Self {
        Self {
            endpoints: self.endpoints.clone(),
            prefix: self.prefix.clone(),
            ca: self.ca.clone(),
            ..Self::default()
        }
    }
}

/// How one call failed.
#[derive(Debug)]
enum Failure {
    /// No member answered (connection errors, 5xx).
    Unreachable(String),
    /// A member answered with an error.
    Refused(String),
    /// A member said the auth token is missing, invalid or expired.
    Unauthenticated(String),
}

/// One key of a range answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value (empty for a keys-only read).
    pub value: Vec<u8>,
    /// The revision that created the key.
    pub create_revision: i64,
    /// The revision that last changed it.
    pub mod_revision: i64,
    /// The lease it is attached to (0: none).
    pub lease: i64,
}

/// The client: shared by every clone.
#[derive(Clone)]
pub struct Etcd {
    agent: ureq::Agent,
    endpoints: Arc<Vec<String>>,
    /// The endpoint that answered last.
    current: Arc<AtomicUsize>,
    /// The user and password to log in with.
    login: Option<(String, Password)>,
    /// The token of the last login.
    token: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

/// Bytes as the gateway's base64.
pub fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

fn unb64(v: &Value) -> Vec<u8> {
    v.as_str()
        .and_then(|s| B64.decode(s).ok())
        .unwrap_or_default()
}

/// An integer the gateway sent as a string (or left out, meaning 0).
pub fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// The key-values of a range answer.
pub fn kvs(answer: &Value) -> Vec<KeyValue> {
    answer["kvs"]
        .as_array()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| KeyValue {
                    key: unb64(&kv["key"]),
                    value: unb64(&kv["value"]),
                    create_revision: int(&kv["create_revision"]),
                    mod_revision: int(&kv["mod_revision"]),
                    lease: int(&kv["lease"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn read_pem(what: &str, path: &std::path::Path) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|e| StoreError::Etcd {
        endpoints: String::new(),
        message: format!("store.{what} {}: {e}", path.display()),
    })
}

impl Etcd {
    /// A client of the members `config` names (nothing is sent yet).
    pub fn new(config: &EtcdConfig) -> Result<Self, StoreError> {
        if config.endpoints.is_empty() {
            return Err(StoreError::Etcd {
                endpoints: String::new(),
                message: "store.endpoints is empty".into(),
            });
        }
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(ca) = &config.ca {
            let pem = read_pem("ca", ca)?;
            let cert = ureq::tls::Certificate::from_pem(&pem).map_err(|e| StoreError::Etcd {
                endpoints: String::new(),
                message: format!("store.ca {}: {e}", ca.display()),
            })?;
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]));
        }
        match (&config.cert, &config.key) {
            (Some(cert), Some(key)) => {
                let bad = |what: &str, path: &PathBuf, e: ureq::Error| StoreError::Etcd {
                    endpoints: String::new(),
                    message: format!("store.{what} {}: {e}", path.display()),
                };
                let chain = ureq::tls::Certificate::from_pem(&read_pem("cert", cert)?)
                    .map_err(|e| bad("cert", cert, e))?;
                let private = ureq::tls::PrivateKey::from_pem(&read_pem("key", key)?)
                    .map_err(|e| bad("key", key, e))?;
                tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(
                    &[chain],
                    private,
                )));
            }
            (None, None) => {}
            _ => {
                return Err(StoreError::Etcd {
                    endpoints: String::new(),
                    message: "store.cert and store.key go together".into(),
                });
            }
        }
        let login = match (&config.username, &config.password) {
            (Some(user), Some(password)) => Some((user.clone(), password.clone())),
            (None, None) => None,
            (Some(_), None) => {
                return Err(StoreError::Etcd {
                    endpoints: String::new(),
                    message: "store.username needs a password (store.password_file or GANTRY_ETCD_PASSWORD)".into(),
                });
            }
            (None, Some(_)) => {
                return Err(StoreError::Etcd {
                    endpoints: String::new(),
                    message: "an etcd password needs store.username".into(),
                });
            }
        };
        let agent_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .tls_config(tls.build())
            .build();
        Ok(Self {
            agent: ureq::Agent::new_with_config(agent_config),
            endpoints: Arc::new(
                config
                    .endpoints
                    .iter()
                    .map(|e| e.trim_end_matches('/').to_owned())
                    .collect(),
            ),
            current: Arc::default(),
            login,
            token: Arc::default(),
        })
    }

    /// The members, for messages.
    pub fn endpoints(&self) -> String {
        self.endpoints.join(",")
    }

    fn error(&self, message: String) -> StoreError {
        StoreError::Etcd {
            endpoints: self.endpoints(),
            message,
        }
    }

    /// `POST {endpoint}{path}` with `body`, trying each member from the last that answered;
    /// logged in first when a user is configured, and again once when etcd says the token
    /// is no longer valid.
    pub fn call(&self, path: &str, body: &Value) -> Result<Value, StoreError> {
        let Some(_) = &self.login else {
            return self.call_once(path, body, None).map_err(|f| self.failed(f));
        };
        let token = self.token()?;
        match self.call_once(path, body, Some(&token)) {
            Err(Failure::Unauthenticated(_)) => {
                self.forget_token(&token);
                let token = self.token()?;
                self.call_once(path, body, Some(&token))
                    .map_err(|f| self.failed(f))
            }
            other => other.map_err(|f| self.failed(f)),
        }
    }

    fn failed(&self, failure: Failure) -> StoreError {
        match failure {
            Failure::Unreachable(m) | Failure::Refused(m) | Failure::Unauthenticated(m) => {
                self.error(m)
            }
        }
    }

    /// One call with `token` (etcd's header is the bare token), trying each member.
    fn call_once(&self, path: &str, body: &Value, token: Option<&str>) -> Result<Value, Failure> {
        let n = self.endpoints.len();
        let start = self.current.load(Ordering::Relaxed);
        let mut last = String::new();
        for i in 0..n {
            let at = (start + i) % n;
            let url = format!("{}{path}", self.endpoints[at]);
            let mut request = self.agent.post(&url);
            if let Some(token) = token {
                request = request.header("authorization", token);
            }
            match request.send_json(body) {
                Ok(mut answer) => {
                    let status = answer.status().as_u16();
                    let text = answer.body_mut().read_to_string().map_err(|e| {
                        Failure::Unreachable(format!("{path}: reading the answer: {e}"))
                    })?;
                    if status >= 500 && !is_auth_error(&text) {
                        last = format!("{url}: {status} {}", text.trim());
                        continue;
                    }
                    self.current.store(at, Ordering::Relaxed);
                    let value: Value = serde_json::from_str(&text)
                        .map_err(|e| Failure::Refused(format!("{path}: not JSON ({e}): {text}")))?;
                    if status >= 400 || value.get("error").is_some() {
                        let message = format!("{path}: {status} {}", text.trim());
                        return Err(if status == 401 || is_auth_error(&text) {
                            Failure::Unauthenticated(message)
                        } else {
                            Failure::Refused(message)
                        });
                    }
                    // Keepalive answers arrive wrapped as one streamed message.
                    return Ok(match value.get("result") {
                        Some(result) => result.clone(),
                        None => value,
                    });
                }
                Err(e) => last = format!("{url}: {e}"),
            }
        }
        Err(Failure::Unreachable(format!("no member answered ({last})")))
    }

    /// The keys in `[key, range_end)` (`range_end` empty: `key` alone).
    pub fn range(
        &self,
        key: &[u8],
        range_end: &[u8],
        limit: i64,
        descending: bool,
        keys_only: bool,
    ) -> Result<Vec<KeyValue>, StoreError> {
        let mut body = json!({"key": b64(key), "limit": limit.to_string()});
        if !range_end.is_empty() {
            body["range_end"] = json!(b64(range_end));
        }
        if descending {
            body["sort_order"] = json!("DESCEND");
            body["sort_target"] = json!("KEY");
        }
        if keys_only {
            body["keys_only"] = json!(true);
        }
        Ok(kvs(&self.call("/v3/kv/range", &body)?))
    }

    /// How many keys `[key, range_end)` holds.
    pub fn count(&self, key: &[u8], range_end: &[u8]) -> Result<u64, StoreError> {
        let body = json!({"key": b64(key), "range_end": b64(range_end), "count_only": true});
        let answer = self.call("/v3/kv/range", &body)?;
        Ok(u64::try_from(int(&answer["count"])).unwrap_or(0))
    }

    /// A transaction: `success` when every `compare` holds, else `failure`; returns
    /// whether it succeeded and the answer.
    pub fn txn(
        &self,
        compare: Vec<Value>,
        success: Vec<Value>,
        failure: Vec<Value>,
    ) -> Result<(bool, Value), StoreError> {
        let body = json!({"compare": compare, "success": success, "failure": failure});
        let answer = self.call("/v3/kv/txn", &body)?;
        Ok((answer["succeeded"].as_bool().unwrap_or(false), answer))
    }

    /// A lease of `ttl_s` seconds; returns its id.
    pub fn grant(&self, ttl_s: u64) -> Result<i64, StoreError> {
        let answer = self.call("/v3/lease/grant", &json!({"TTL": ttl_s.to_string()}))?;
        match int(&answer["ID"]) {
            0 => Err(self.error(format!("lease grant answered {answer}"))),
            id => Ok(id),
        }
    }

    /// Renews lease `id`; returns the seconds it has left (0: it has expired).
    pub fn keep_alive(&self, id: i64) -> Result<i64, StoreError> {
        let answer = self.call("/v3/lease/keepalive", &json!({"ID": id.to_string()}))?;
        Ok(int(&answer["TTL"]))
    }

    /// Ends lease `id` now, deleting the keys attached to it.
    pub fn revoke(&self, id: i64) -> Result<(), StoreError> {
        self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}))
            .map(drop)
    }
}

/// A put of `key` = `value` in a transaction (attached to `lease` when not 0).
pub fn put_op(key: &[u8], value: &[u8], lease: i64) -> Value {
    let mut put = json!({"key": b64(key), "value": b64(value)});
    if lease != 0 {
        put["lease"] = json!(lease.to_string());
    }
    json!({"request_put": put})
}

/// A delete of `key` (with `range_end`: of the range) in a transaction.
pub fn delete_op(key: &[u8], range_end: Option<&[u8]>) -> Value {
    let mut delete = json!({"key": b64(key)});
    if let Some(end) = range_end {
        delete["range_end"] = json!(b64(end));
    }
    json!({"request_delete_range": delete})
}

/// A read of `key` in a transaction.
pub fn get_op(key: &[u8]) -> Value {
    json!({"request_range": {"key": b64(key)}})
}

/// A comparison: `key` does not exist.
pub fn absent(key: &[u8]) -> Value {
    json!({"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"})
}

/// A comparison: `key` holds `value`.
pub fn holds(key: &[u8], value: &[u8]) -> Value {
    json!({"key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(value)})
}

/// A comparison: `key` was created at revision `revision` (it is still the same key).
pub fn created_at(key: &[u8], revision: i64) -> Value {
    json!({"key": b64(key), "target": "CREATE", "result": "EQUAL",
           "create_revision": revision.to_string()})
}

/// A comparison: `key` was last changed at revision `revision`.
pub fn changed_at(key: &[u8], revision: i64) -> Value {
    json!({"key": b64(key), "target": "MOD", "result": "EQUAL",
           "mod_revision": revision.to_string()})
}
