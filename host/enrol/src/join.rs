//! `gantry agent join URL --token T --ca-hash H`: makes a node of this machine. It fetches
//! the cluster CA from the controller, checks it against the hash the administrator copied
//! (a wrong one ends the join before the token is sent anywhere), then over TLS checked
//! against that CA spends the join token for this node's credential and agent certificate,
//! and writes the agent's configuration (`agent.toml`, 0600) and `pki/` beside it. A
//! refusal (a wrong hash, an expired, revoked or spent token, a node name already taken)
//! writes nothing. The caller then starts the agent on that configuration.
//!
//! Owns: the command's client side and the files it writes. Does not own the checks the
//! controller makes (its `enrolment`) or the agent's run (`gantry-agent`).

use crate::init::{host_name, toml_string, write_new};
use crate::pki;
use anyhow::{Context, bail};
use gantry_api::cluster::{PROTOCOL_VERSION, ProtoError};
use gantry_api::cluster_join::{JOIN_CA_PATH, JOIN_PATH, JoinReply, JoinRequest};
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `gantry agent join` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct JoinArgs {
    /// The controller's join URL, as `gantry init` printed it (https://HOST:8420).
    pub url: String,
    /// The join token (`gjt_...`).
    #[arg(long)]
    pub token: String,
    /// The cluster CA's hash (`sha256:...`), as `gantry init` printed it.
    #[arg(long)]
    pub ca_hash: String,
    /// The agent configuration to write (its `pki/` goes beside it).
    #[arg(long, default_value = "/etc/gantry/agent.toml")]
    pub config: PathBuf,
    /// The agent's data directory (default: /var/lib/gantry as root, else ./gantry-data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The node's name in the cluster (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Where the agent serves the controller's calls.
    #[arg(long, default_value = "0.0.0.0:8421")]
    pub listen: String,
    /// The node's address as the controller reaches it (default: the address this machine
    /// reaches the controller from).
    #[arg(long)]
    pub advertise: Option<String>,
    /// GPUs when there is no NVML driver (`[node] gpus`).
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Do not ask NVML; use configured GPUs.
    #[arg(long)]
    pub no_nvml: bool,
    /// `[execution] cgroup_parent` of this agent: give each agent sharing a host its own.
    #[arg(long)]
    pub cgroup_parent: Option<String>,
    /// Write the configuration only; do not start the agent.
    #[arg(long)]
    pub no_start: bool,
}

/// What a join wrote.
#[derive(Debug, Clone)]
pub struct Joined {
    /// The agent configuration.
    pub config: PathBuf,
    /// The node's name.
    pub node: String,
}

const TIMEOUT: Duration = Duration::from_secs(15);

/// `gantry agent join`: joins and writes the agent's configuration (not started here).
pub fn join(args: &JoinArgs) -> anyhow::Result<Joined> {
    let url = args.url.trim().trim_end_matches('/').to_string();
    if !url.starts_with("https://") {
        bail!("the join URL must be https:// (as gantry init prints it), not {url:?}");
    }
    let wanted = args.ca_hash.trim().to_ascii_lowercase();
    if !wanted.starts_with("sha256:") || wanted.len() != 7 + 64 {
        bail!("--ca-hash must be sha256: and 64 hex digits, as gantry init prints it");
    }
    let config_path = std::path::absolute(&args.config)?;
    if config_path.exists() {
        bail!(
            "{} exists: this machine joined already (remove it and its pki/ to join again)",
            config_path.display()
        );
    }
    // Before the token is spent: the configuration's directory must take the files.
    let dir = config_path.parent().unwrap_or(Path::new("/")).to_path_buf();
    writable(&dir)?;
    let name = args.name.clone().unwrap_or_else(host_name);
    if name.is_empty() {
        bail!("cannot read this machine's host name: pass --name NODE");
    }
    let advertise = match &args.advertise {
        Some(a) => a.clone(),
        None => advertised_for(&args.listen, &url)?,
    };

    // 1. The CA, unauthenticated, checked by its hash before anything is sent.
    let insecure = http(
        ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .disable_verification(true)
            .build(),
    );
    let ca_pem = call(insecure.get(format!("{url}{JOIN_CA_PATH}")).call(), &url)?;
    let ca_pem = String::from_utf8(ca_pem).context("the controller's CA is not text")?;
    let found = pki::ca_hash(&ca_pem)?;
    if found != wanted {
        bail!(
            "the controller at {url} presents a CA whose hash is {found}, not the --ca-hash given ({wanted}): refusing to join (a mistyped hash, or another machine answering at that address); nothing was written"
        );
    }
    // 2. The join, over TLS checked against that CA alone.
    let der = pki::first_der(&ca_pem)?;
    let trusted = http(
        ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .root_certs(ureq::tls::RootCerts::new_with_certs(&[
                ureq::tls::Certificate::from_der(&der).to_owned(),
            ]))
            .build(),
    );
    let request = JoinRequest {
        token: args.token.trim().to_string(),
        node: name.clone(),
        addresses: vec![advertise.clone()],
        version: gantry_api::cluster::GANTRY_VERSION.to_string(),
        protocol: PROTOCOL_VERSION,
    };
    let body = call(
        trusted
            .post(format!("{url}{JOIN_PATH}"))
            .send_json(&request),
        &url,
    )?;
    let reply: JoinReply =
        serde_json::from_slice(&body).context("the controller's join answer is not JSON")?;
    // 3. The files: pki/ first, the configuration last (its presence means a whole join).
    write_files(args, &dir, &config_path, &url, &advertise, &reply)?;
    Ok(Joined {
        config: config_path,
        node: reply.node,
    })
}

/// Whether files can be made in `dir`, or in its nearest existing ancestor when it is
/// missing (nothing is left behind): checked before the join, so that a join without the
/// rights to write its configuration spends no token.
fn writable(dir: &Path) -> anyhow::Result<()> {
    let existing = dir
        .ancestors()
        .find(|a| a.is_dir())
        .unwrap_or(Path::new("/"));
    let probe = existing.join(format!(".gantry-join-{}", std::process::id()));
    write_new(&probe, "", 0o600).with_context(|| {
        format!(
            "cannot write the configuration into {} (run gantry agent join as root, or pass --config)",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

fn http(tls: ureq::tls::TlsConfig) -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(TIMEOUT))
            .tls_config(tls)
            .build(),
    )
}

fn call(
    sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    url: &str,
) -> anyhow::Result<Vec<u8>> {
    let mut response = sent.with_context(|| format!("cannot reach the controller at {url}"))?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .with_context(|| format!("reading the controller's answer from {url}"))?;
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let why = serde_json::from_slice::<ProtoError>(&body).map_or_else(
        |_| String::from_utf8_lossy(&body).chars().take(300).collect(),
        |e| e.error,
    );
    bail!("the controller refused the join ({status}): {why}; nothing was written")
}

/// The address this machine reaches `url`'s host from (a UDP socket's local address after
/// `connect`: no packet is sent), unless `listen` names a specific address.
fn advertised_for(listen: &str, url: &str) -> anyhow::Result<String> {
    if let Ok(addr) = listen.parse::<SocketAddr>()
        && !addr.ip().is_unspecified()
    {
        return Ok(addr.ip().to_string());
    }
    let authority = url.trim_start_matches("https://");
    let authority = authority.split('/').next().unwrap_or(authority);
    let target = authority
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("cannot resolve {authority}: pass --advertise ADDR"))?;
    let socket = UdpSocket::bind(if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    })?;
    socket.connect(target)?;
    Ok(socket.local_addr()?.ip().to_string())
}

fn write_files(
    args: &JoinArgs,
    dir: &Path,
    config_path: &Path,
    url: &str,
    advertise: &str,
    reply: &JoinReply,
) -> anyhow::Result<()> {
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).with_context(|| format!("cannot create {}", pki.display()))?;
    let files = [
        (pki.join("ca.pem"), reply.ca_pem.as_str(), 0o644),
        (pki.join("agent.pem"), reply.cert_pem.as_str(), 0o644),
        (pki.join("agent.key"), reply.key_pem.as_str(), 0o600),
    ];
    let mut written = Vec::new();
    let mut result = Ok(());
    for (path, text, mode) in &files {
        // A join replaces an earlier join's certificates (its agent.toml is gone).
        let _ = std::fs::remove_file(path);
        result = write_new(path, text, *mode);
        if result.is_err() {
            break;
        }
        written.push(path.clone());
    }
    let mut text = format!(
        "# Written by `gantry agent join`: node {node} of the cluster at {url}.\n\
         # This file holds the node's credential: keep it 0600.\n",
        node = reply.node
    );
    if let Some(d) = &args.data_dir {
        let d = std::path::absolute(d)?;
        text += &format!("data_dir = {}\n", toml_string(&d.display().to_string()));
    }
    text += &format!(
        "\n[agent]\ncontroller = {}\nlisten = {}\nadvertise = {}\nca_cert = {}\n",
        toml_string(url),
        toml_string(&args.listen),
        toml_string(advertise),
        toml_string(&pki.join("ca.pem").display().to_string()),
    );
    text += &format!("\n[node]\nname = {}\n", toml_string(&reply.node));
    if let Some(g) = args.gpus {
        text += &format!("gpus = {g}\n");
    }
    if args.no_nvml {
        text += "use_nvml = false\n";
    }
    if let Some(parent) = &args.cgroup_parent {
        text += &format!("\n[execution]\ncgroup_parent = {}\n", toml_string(parent));
    }
    text += &format!(
        "\n[cluster]\nnode_credential = {}\n\n[tls]\ncert = {}\nkey = {}\n",
        toml_string(&reply.credential),
        toml_string(&pki.join("agent.pem").display().to_string()),
        toml_string(&pki.join("agent.key").display().to_string()),
    );
    if result.is_ok() {
        result = write_new(config_path, &text, 0o600);
    }
    if let Err(e) = result {
        for path in written {
            let _ = std::fs::remove_file(path);
        }
        return Err(e);
    }
    Ok(())
}
