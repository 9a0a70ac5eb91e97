//! `gantry init`: makes a controller of this machine. It writes the cluster CA and the
//! controller's certificate (`<dir>/pki/`), a configuration (`<dir>/gantry.toml`, 0600: it
//! holds the cluster token) that serves HTTPS with them and signs joining nodes'
//! certificates, makes a first join token in the store and prints the one command to run on
//! each node. It refuses to overwrite an existing configuration or CA (the package's
//! all-comments `gantry.toml` aside).
//!
//! Owns: the command and the files it writes. Does not own the CA (`pki`), the token
//! (`join_token`) or the configuration's meaning (`gantry-config`).

use crate::join_token;
use crate::pki::ClusterCa;
use anyhow::{Context, bail};
use gantry_api::cluster_join::join_command;
use std::path::{Path, PathBuf};

/// `gantry init` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// Where the configuration and `pki/` go.
    #[arg(long, default_value = "/etc/gantry")]
    pub config_dir: PathBuf,
    /// The controller's data directory (default: /var/lib/gantry as root, else ./gantry-data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The controller's names and addresses as nodes reach it, comma-separated; the first is
    /// in the join command (default: this machine's host name).
    #[arg(long, value_delimiter = ',')]
    pub advertise: Vec<String>,
    /// Where the controller listens.
    #[arg(long, default_value = "0.0.0.0:8420")]
    pub listen: String,
    /// How long the first join token is valid: seconds, or with m, h or d.
    #[arg(long, default_value = "1h")]
    pub token_ttl: String,
    /// How many nodes the first join token may join.
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// Print only the join command.
    #[arg(long)]
    pub quiet: bool,
}

/// `30`, `30s`, `15m`, `2h`, `1d` as seconds.
pub fn parse_ttl(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("--token-ttl {text:?}: a number with s, m, h or d"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => bail!("--token-ttl {text:?}: the unit must be s, m, h or d"),
    };
    Ok(n * scale)
}

/// This machine's host name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Writes `text` to `path` with `mode`, refusing to replace a file.
pub(crate) fn write_new(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `s` as a TOML string (JSON's escaping is TOML's for basic strings).
pub(crate) fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `gantry init`.
pub fn main(args: InitArgs) -> anyhow::Result<()> {
    let ttl_s = parse_ttl(&args.token_ttl)?;
    let mut names: Vec<String> = args
        .advertise
        .iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    if names.is_empty() {
        let host = host_name();
        if host.is_empty() {
            bail!("cannot read this machine's host name: pass --advertise NAME");
        }
        names.push(host);
    }
    let port = args
        .listen
        .rsplit_once(':')
        .map(|(_, p)| p)
        .and_then(|p| p.parse::<u16>().ok())
        .with_context(|| format!("--listen {:?} has no port", args.listen))?;
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None if gantry_private_files::daemon_uid() == 0 => PathBuf::from("/var/lib/gantry"),
        None => PathBuf::from("gantry-data"),
    };
    let data_dir = std::path::absolute(&data_dir)?;
    let dir = std::path::absolute(&args.config_dir)?;
    let config_path = dir.join("gantry.toml");
    let pki = dir.join("pki");
    // The package's /etc/gantry/gantry.toml is all comments: it gives way.
    let template = std::fs::read_to_string(&config_path)
        .map(|t| only_comments(&t))
        .unwrap_or(false);
    if template {
        std::fs::remove_file(&config_path)
            .with_context(|| format!("cannot replace {}", config_path.display()))?;
    }
    if config_path.exists() || pki.join("ca.pem").exists() || dir.join("admin-token").exists() {
        bail!(
            "{} or {} exists: this machine was initialised already (remove them to start over; a new CA means every node joins again)",
            config_path.display(),
            pki.join("ca.pem").display()
        );
    }
    std::fs::create_dir_all(&pki).with_context(|| format!("cannot create {}", pki.display()))?;
    let ca = ClusterCa::generate()?;
    let (cert, key) = ca.issue("gantry controller", &with_loopback(&names))?;
    let cluster_token = format!(
        "gct_{}",
        hex::encode(crate::random_bytes::<32>().context("cannot read random bytes")?)
    );
    let host = url_host(&names[0]);
    let join_url = format!("https://{host}:{port}");
    // The controller listens beyond loopback: TCP callers need an API token. One for the
    // administrator (role admin, user root), kept in a 0600 file; users get theirs with
    // `gantry token create`, local accounts need none on the socket.
    let admin_token = gantry_config::auth::generate_token().context("cannot read random bytes")?;
    let admin_entry = gantry_config::auth::TokenEntry {
        name: "admin-gantry-init".into(),
        sha256: gantry_config::auth::token_sha256(&admin_token),
        user: "root".into(),
        accounts: vec!["root".into()],
        role: gantry_config::auth::Role::Admin,
    };
    let auth = gantry_config::auth::snippet(&admin_entry).context("cannot write a token entry")?;
    let config = controller_config(&ConfigParts {
        listen: &args.listen,
        data_dir: &data_dir,
        pki: &pki,
        cluster_token: &cluster_token,
        join_url: &join_url,
        names: &names,
        port,
        auth: &auth,
    });
    write_new(&pki.join("ca.pem"), ca.cert_pem(), 0o644)?;
    write_new(&pki.join("ca.key"), ca.key_pem(), 0o600)?;
    write_new(&pki.join("controller.pem"), &cert, 0o644)?;
    write_new(&pki.join("controller.key"), &key, 0o600)?;
    write_new(&dir.join("admin-token"), &format!("{admin_token}\n"), 0o600)?;
    write_new(&config_path, &config, 0o600)?;
    // Checked as the daemon will read it.
    gantry_config::Config::load(Some(&config_path))
        .context("the configuration gantry init made does not load (a bug)")?;

    gantry_private_files::restrict_umask();
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let store = gantry_store::Store::open(&data_dir).with_context(|| {
        format!(
            "cannot open the store in {} (is a daemon running there? then make a token with `gantry token join`)",
            data_dir.display()
        )
    })?;
    let (token, record) = join_token::create(&store, ttl_s, args.nodes, "gantry init", now_ms())??;
    store.flush()?;
    drop(store);
    let command = join_command(&join_url, &token, &ca.hash()?);
    if args.quiet {
        println!("{command}");
        return Ok(());
    }
    println!("Gantry controller initialised.");
    println!("  configuration  {}", config_path.display());
    println!(
        "  CA             {} ({})",
        pki.join("ca.pem").display(),
        ca.hash()?
    );
    println!("  data           {}", data_dir.display());
    println!(
        "  admin token    {} (for the API over TCP: --token-file; local accounts use the socket)",
        dir.join("admin-token").display()
    );
    println!();
    println!("Start it:  systemctl enable --now gantry-controller");
    println!("       or  gantry serve --config {}", config_path.display());
    println!();
    let nodes = if record.max_uses == 1 {
        "one node".to_string()
    } else {
        format!("{} nodes", record.max_uses)
    };
    println!(
        "Then on each node (this token joins {nodes} within {}; `gantry token join` makes more):",
        args.token_ttl
    );
    println!("  {command}");
    Ok(())
}

/// Whether a configuration sets nothing (blank lines and comments only, as the package's).
fn only_comments(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#'))
}

/// The names plus 127.0.0.1 and localhost, so that the controller's own CLI and probes on
/// this machine can check its certificate too.
fn with_loopback(names: &[String]) -> Vec<String> {
    let mut all = names.to_vec();
    for extra in ["127.0.0.1", "localhost"] {
        if !all.iter().any(|n| n == extra) {
            all.push(extra.to_string());
        }
    }
    all.truncate(crate::pki::MAX_NAMES);
    all
}

/// A name or address as a URL's host (IPv6 in brackets).
pub(crate) fn url_host(name: &str) -> String {
    match name.parse::<std::net::Ipv6Addr>() {
        Ok(v6) => format!("[{v6}]"),
        Err(_) => name.to_string(),
    }
}

struct ConfigParts<'a> {
    listen: &'a str,
    data_dir: &'a Path,
    pki: &'a Path,
    cluster_token: &'a str,
    join_url: &'a str,
    names: &'a [String],
    port: u16,
    auth: &'a str,
}

fn controller_config(p: &ConfigParts<'_>) -> String {
    let path = |name: &str| toml_string(&p.pki.join(name).display().to_string());
    let hosts: Vec<String> = p
        .names
        .iter()
        .map(|n| toml_string(&format!("{}:{}", url_host(n), p.port)))
        .collect();
    format!(
        "# Written by `gantry init`. Keys not set here have their defaults\n\
         # (docs/admin/configuration.md). This file holds the cluster token: keep it 0600.\n\
         listen = {listen}\n\
         data_dir = {data}\n\
         \n\
         [tls]\n\
         cert = {cert}\n\
         key = {key}\n\
         \n\
         [http]\n\
         # The names nodes and users reach the controller by.\n\
         allowed_hosts = [{hosts}]\n\
         \n\
         [cluster]\n\
         # The cluster's secret: each node's credential is derived from it (a node never sees it).\n\
         token = {token}\n\
         ca_cert = {ca}\n\
         ca_key = {ca_key}\n\
         join_url = {join_url}\n\
         advertise_addr = {advertise}\n\
         \n\
         # The administrator's API token (its sha256; the token is in admin-token beside this file).\n\
         {auth}",
        listen = toml_string(p.listen),
        data = toml_string(&p.data_dir.display().to_string()),
        cert = path("controller.pem"),
        key = path("controller.key"),
        hosts = hosts.join(", "),
        token = toml_string(p.cluster_token),
        ca = path("ca.pem"),
        ca_key = path("ca.key"),
        join_url = toml_string(p.join_url),
        advertise = toml_string(&p.names[0]),
        auth = p.auth,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_an_untouched_template_gives_way() {
        assert!(only_comments(
            "# a comment\n\n  # listen = \"0.0.0.0:8420\"\n"
        ));
        assert!(!only_comments("# a comment\nlisten = \"0.0.0.0:8420\"\n"));
    }

    #[test]
    fn ttls_take_units_and_refuse_others() {
        assert_eq!(parse_ttl("90").unwrap(), 90);
        assert_eq!(parse_ttl("15m").unwrap(), 900);
        assert_eq!(parse_ttl("2h").unwrap(), 7200);
        assert_eq!(parse_ttl("1d").unwrap(), 86_400);
        assert!(parse_ttl("2w").is_err());
        assert!(parse_ttl("h").is_err());
    }
}
