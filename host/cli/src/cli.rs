//! The command-line client: every subcommand is one HTTP call to the daemon's API
//! (`--server`, or `GANTRY_SERVER`: `unix:PATH` for the daemon's Unix socket, where the
//! kernel names the caller, or `http(s)://HOST:PORT`; default [`default_server`]), printing a
//! table or the JSON answer. Errors from the API are shown with their code and field.
//! With a token (see `auth_cli::read_token`) every request carries
//! `Authorization: Bearer <token>`. `https://` servers are verified against the public
//! roots, or only against `--ca-cert` (`GANTRY_CA_CERT`) when given (see `tls`).
//!
//! Owns: argument → request mapping and output formatting. Holds no state.

use anyhow::{Context, bail};
use serde_json::Value;
use std::io::Read;

/// The socket `gantry serve` makes with its default data directory, relative to where it runs.
const DEFAULT_SOCKET: &str = "gantry-data/gantry.sock";

/// The server when none is given: the default daemon's Unix socket when it exists here, else
/// `http://127.0.0.1:8420`.
pub fn default_server() -> String {
    use std::os::unix::fs::FileTypeExt;
    let socket = std::fs::symlink_metadata(DEFAULT_SOCKET).is_ok_and(|m| m.file_type().is_socket());
    match socket {
        true => format!("unix:{DEFAULT_SOCKET}"),
        false => format!("http://{}", gantry::config::DEFAULT_LISTEN),
    }
}

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
    /// A client for `server` (e.g. `http://127.0.0.1:8420`); an `https://` server must
    /// have a certificate from a public CA.
    pub fn new(server: &str) -> Self {
        Self::with_tls(
            server,
            ureq::tls::TlsConfig::builder()
                .provider(ureq::tls::TlsProvider::Rustls)
                .build(),
        )
    }

    /// A client for `server` that trusts, for `https://`, only the certificates in the PEM
    /// file `ca_cert` (a private CA or the daemon's self-signed certificate) when given.
    pub fn with_ca_cert(
        server: &str,
        ca_cert: Option<&std::path::Path>,
    ) -> Result<Self, gantry::tls::TlsError> {
        Ok(Self::with_tls(
            server,
            gantry::tls::ureq_tls("--ca-cert", ca_cert)?,
        ))
    }

    fn with_tls(server: &str, tls: ureq::tls::TlsConfig) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .tls_config(tls)
            .build();
        if let Some(path) = server.strip_prefix("unix:") {
            let connector = gantry::local_socket::client::UnixConnector::new(path.into());
            return Self {
                // The host is only the request's `Host` header; the socket is the address.
                base: "http://localhost".into(),
                label: server.to_string(),
                agent: ureq::Agent::with_parts(
                    config,
                    connector,
                    ureq::unversioned::resolver::DefaultResolver::default(),
                ),
                token: None,
            };
        }
        Self {
            base: server.trim_end_matches('/').to_string(),
            label: server.trim_end_matches('/').to_string(),
            agent: ureq::Agent::new_with_config(config),
            token: None,
        }
    }

    /// The same client, sending `token` with every request.
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// Whether requests carry a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
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

    fn finish(
        &self,
        resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> anyhow::Result<Value> {
        let mut resp = resp.map_err(|e| self.unreachable(e))?;
        let status = resp.status();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            return Ok(body);
        }
        let e = &body["error"];
        let field = e["field"]
            .as_str()
            .map(|f| format!(" (field `{f}`)"))
            .unwrap_or_default();
        bail!(
            "{} {}: {}{field}",
            status.as_u16(),
            e["code"].as_str().unwrap_or("error"),
            e["message"].as_str().unwrap_or(&body.to_string())
        )
    }

    /// Why a request got no answer; TLS failures say so plainly.
    fn unreachable(&self, e: ureq::Error) -> anyhow::Error {
        let base = &self.label;
        match tls_failure(&e) {
            Some(rustls::Error::InvalidCertificate(why)) => anyhow::anyhow!(
                "cannot verify the daemon's certificate: {} (server {base}; to trust a private CA or a self-signed certificate, pass --ca-cert FILE or set GANTRY_CA_CERT)",
                certificate_problem(why)
            ),
            Some(other) => anyhow::anyhow!(
                "TLS handshake with the gantry daemon at {base} failed: {other} (is it serving HTTPS?)"
            ),
            None if matches!(e, ureq::Error::Protocol(_)) && base.starts_with("http://") => {
                anyhow::Error::new(e).context(format!(
                    "the gantry daemon at {base} did not answer in HTTP (if it serves HTTPS, use https://)"
                ))
            }
            None => {
                anyhow::Error::new(e).context(format!("cannot reach the gantry daemon at {base}"))
            }
        }
    }

    /// GET a path.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.finish(self.req(self.agent.get(self.url(path))).call())
    }

    /// GET a path as text.
    pub fn get_text(&self, path: &str) -> anyhow::Result<String> {
        match self.finish(self.req(self.agent.get(self.url(path))).call())? {
            Value::String(s) => Ok(s),
            v => Ok(v.to_string()),
        }
    }

    /// POST JSON.
    pub fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.finish(self.req(self.agent.post(self.url(path))).send_json(body))
    }

    /// DELETE.
    pub fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.finish(self.req(self.agent.delete(self.url(path))).call())
    }

    /// PUT JSON.
    pub fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.finish(self.req(self.agent.put(self.url(path))).send_json(body))
    }

    /// GET a streaming answer (e.g. `/attach`); the reader yields the body as it arrives.
    pub fn stream(&self, path: &str) -> anyhow::Result<Box<dyn Read + Send>> {
        let resp = self
            .req(self.agent.get(self.url(path)))
            .call()
            .map_err(|e| self.unreachable(e))?;
        if !resp.status().is_success() {
            self.finish(Ok(resp))?;
            bail!("unexpected answer");
        }
        Ok(Box::new(resp.into_body().into_reader()))
    }

    /// POST raw bytes.
    pub fn post_bytes(&self, path: &str, bytes: &[u8]) -> anyhow::Result<Value> {
        self.finish(
            self.req(self.agent.post(self.url(path)))
                .header("content-type", "application/wasm")
                .send(bytes),
        )
    }
}

/// The rustls error behind a failed request, if TLS is what failed.
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

/// `--env K=V` options as the job spec's `env` object.
pub fn env_vars(pairs: &[String]) -> anyhow::Result<serde_json::Map<String, Value>> {
    let mut env = serde_json::Map::new();
    for kv in pairs {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--env `{kv}` is not K=V"))?;
        env.insert(k.into(), Value::String(v.into()));
    }
    Ok(env)
}

/// Parses "90", "90s", "15m", "4h", "2d" into seconds.
pub fn parse_duration_s(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = num
        .parse()
        .with_context(|| format!("`{text}` is not a duration like 90s, 15m, 4h or 2d"))?;
    let mult = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => bail!("`{text}`: unknown unit `{unit}` (use s, m, h or d)"),
    };
    Ok(n * mult)
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

/// Prints jobs as a table.
pub fn print_jobs(jobs: &Value) {
    println!(
        "{:>6}  {:<10} {:<20} {:<10} {:<8} {:>5}  REASON / GPUs",
        "ID", "STATE", "NAME", "USER", "QUEUE", "TASKS"
    );
    for j in jobs.as_array().into_iter().flatten() {
        let tasks = j["spec"]["tasks"].as_array().map_or(0, |t| {
            t.iter()
                .map(|g| g["count"].as_u64().unwrap_or(0))
                .sum::<u64>()
        });
        let detail = if j["state"] == "running" {
            let gpus: Vec<String> = j["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    t["gpus"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|g| cell(&g["index"]))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            format!("GPUs [{}]", gpus.join(" | "))
        } else {
            format!(
                "{}: {}",
                cell(&j["reason"]["code"]),
                cell(&j["reason"]["message"])
            )
        };
        let name: String = cell(&j["spec"]["name"]).chars().take(20).collect();
        println!(
            "{:>6}  {:<10} {:<20} {:<10} {:<8} {:>5}  {detail}",
            cell(&j["id"]),
            cell(&j["state"]),
            name,
            cell(&j["spec"]["user"]),
            cell(&j["spec"]["queue"]),
            tasks
        );
    }
}

/// Prints nodes: state (with the drain's reason, who and how long ago), GPU groups,
/// and per GPU its holders, health and MIG devices.
pub fn print_nodes(nodes: &Value) {
    for n in nodes.as_array().into_iter().flatten() {
        println!(
            "{} ({}, GPUs from {}): CPU {}/{} milli, memory {}/{} MiB",
            cell(&n["name"]),
            cell(&n["state"]),
            cell(&n["gpu_source"]),
            cell(&n["cpu_milli_allocated"]),
            cell(&n["cpu_milli"]),
            cell(&n["memory_mib_allocated"]),
            cell(&n["memory_mib"])
        );
        if n["agent"].as_str().is_some_and(|a| a != "local") {
            println!(
                "  agent {} (address {}), last heartbeat {}",
                cell(&n["agent"]),
                cell(&n["addr"]),
                ago(&n["last_heartbeat_ms"])
            );
        }
        if let Some(reason) = n["down_reason"].as_str() {
            println!("  DOWN {}: {reason}", ago(&n["down_since_ms"]));
        }
        let d = &n["drain"];
        if d.is_object() {
            println!(
                "  drained by {} {}: {}",
                cell(&d["by"]),
                ago(&d["since_ms"]),
                cell(&d["reason"])
            );
        }
        if let Some(groups) = n["labels"]["gantry.io/gpu-groups"].as_str() {
            println!("  GPU groups (NVLink): {groups}");
        }
        for g in n["gpus"].as_array().into_iter().flatten() {
            let holders: Vec<String> = g["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| format!("job {} ({} milli)", cell(&h[0]), cell(&h[1])))
                .collect();
            let health = match &g["health"] {
                h if h.is_object() => format!(
                    "  UNHEALTHY {}: {}",
                    ago(&h["since_ms"]),
                    cell(&h["reason"])
                ),
                _ => String::new(),
            };
            println!(
                "  GPU {:>2} {:<16} {:>4}/1000 milli  {}{health}",
                cell(&g["index"]),
                cell(&g["model"]),
                cell(&g["allocated_milli"]),
                if holders.is_empty() {
                    "free".to_string()
                } else {
                    holders.join(", ")
                }
            );
            for m in g["mig_devices"].as_array().into_iter().flatten() {
                println!(
                    "       MIG {} {} MiB {}",
                    cell(&m["profile"]),
                    cell(&m["memory_mib"]),
                    cell(&m["uuid"])
                );
            }
        }
        for note in n["notes"].as_array().into_iter().flatten() {
            println!("  note: {}", cell(note));
        }
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

/// "since 5m ago" for a time in ms since the Unix epoch.
fn ago(ms: &Value) -> String {
    let Some(then) = ms.as_u64() else {
        return String::new();
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let s = now.saturating_sub(then) / 1000;
    let text = match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    };
    format!("since {text} ago")
}

/// Reads a whole file (for uploads and pipeline files).
pub fn read_file(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

pub use gantry::pipeline_file::{parse_pipeline_text, read_pipeline};

/// `service: <node>:<port> (healthy, 2 restarts)` for a service job, else `None`.
pub fn service_line(job: &Value) -> Option<String> {
    if job["spec"]["kind"] != "service" {
        return None;
    }
    let node = job["tasks"][0]["node"].as_str().unwrap_or("-");
    let state = if job["state"] != "running" {
        cell(&job["state"])
    } else if !job["restart_at_ms"].is_null() {
        "restarting".into()
    } else {
        job["health"]["state"].as_str().unwrap_or("starting").into()
    };
    let restarts = job["restarts"].as_u64().unwrap_or(0);
    let plural = if restarts == 1 { "" } else { "s" };
    Some(format!(
        "service: {node}:{} ({state}, {restarts} restart{plural})",
        cell(&job["service_port"])
    ))
}

/// Prints JSON prettily.
pub fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}
