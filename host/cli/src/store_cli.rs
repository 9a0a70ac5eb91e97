//! `gantry store migrate --from DIR --to etcd:ENDPOINTS,postgres:URL`: moves a stopped
//! controller's state (sled) and history (SQLite) to etcd and PostgreSQL, the backends of
//! a cluster of several controllers (`[store] backend = "etcd"`, `[history] backend =
//! "postgres"`), and says what it copied (`gantry_store::Store::copy_into`).
//!
//! Passwords never travel on the command line, where every local account reads them in
//! `ps` (issue 43, finding 14): a PostgreSQL URL with a password in `--to` is refused; the
//! password comes from `--history-password-file` (mode 0600) or `GANTRY_HISTORY_PASSWORD`,
//! and an etcd user's (`--etcd-user`) from `--etcd-password-file` or `GANTRY_ETCD_PASSWORD`.
//!
//! Owns: the target's syntax, where its passwords come from and the report's wording.
//! Does not own the copy.

use anyhow::{Context, Result, bail};
use gantry_store::etcd::{EtcdConfig, Password};
use gantry_store::secret_file::{from_env, read_private};
use gantry_store::{HistoryBackend, StateBackend, Store};
use std::path::{Path, PathBuf};

/// Where the target's passwords come from (never from the command line itself).
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// A 0600 file holding the PostgreSQL user's password (else `GANTRY_HISTORY_PASSWORD`).
    pub history_password_file: Option<PathBuf>,
    /// An etcd user to log in as.
    pub etcd_user: Option<String>,
    /// A 0600 file holding that user's password (else `GANTRY_ETCD_PASSWORD`).
    pub etcd_password_file: Option<PathBuf>,
}

/// The environment variable of the history database's password.
const HISTORY_PASSWORD_ENV: &str = "GANTRY_HISTORY_PASSWORD";
/// The environment variable of the etcd user's password.
const ETCD_PASSWORD_ENV: &str = "GANTRY_ETCD_PASSWORD";

/// A password from `file` (flag `flag`, mode 0600) or the environment variable `env`.
fn password(flag: &str, file: Option<&Path>, env: &str) -> Result<Option<String>> {
    match (file, from_env(env)) {
        (Some(_), Some(_)) => bail!("{flag} and {env} are both set: give the password once"),
        (Some(path), None) => Ok(Some(read_private(flag, path)?)),
        (None, from_env) => Ok(from_env),
    }
}

/// The PostgreSQL URL of `--to` with its password put in from a file or the environment;
/// a URL that carries one itself is refused.
fn history_url(url: &str, secrets: &Secrets) -> Result<String> {
    if gantry_store::postgres_secret::url_has_password(url) {
        bail!(
            "--to: the PostgreSQL URL carries a password, which every local account can read on the command line: take it out and give it in a file only you may read (--history-password-file FILE) or in {HISTORY_PASSWORD_ENV}"
        );
    }
    let given = password(
        "--history-password-file",
        secrets.history_password_file.as_deref(),
        HISTORY_PASSWORD_ENV,
    )?;
    match given {
        Some(p) => Ok(gantry_store::postgres_secret::with_password(url, &p)?),
        None => Ok(url.to_string()),
    }
}

/// The etcd endpoints and the PostgreSQL URL of `--to`.
pub fn parse_target(to: &str) -> Result<(Vec<String>, String)> {
    let mut endpoints = Vec::new();
    let mut postgres = None;
    let mut in_etcd = false;
    for part in to.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some(first) = part.strip_prefix("etcd:") {
            in_etcd = true;
            endpoints.push(first.to_string());
        } else if let Some(url) = part.strip_prefix("postgres:") {
            in_etcd = false;
            postgres = Some(url.to_string());
        } else if in_etcd {
            endpoints.push(part.to_string());
        } else {
            bail!("--to: {part:?} is neither etcd:ENDPOINT nor postgres:URL");
        }
    }
    if endpoints.is_empty() {
        bail!("--to names no etcd endpoint (etcd:http://HOST:2379,...)");
    }
    if let Some(bad) = endpoints
        .iter()
        .find(|e| !(e.starts_with("http://") || e.starts_with("https://")))
    {
        bail!("--to: etcd endpoint {bad:?} is not an http:// or https:// URL");
    }
    let postgres = postgres.context("--to names no PostgreSQL URL (postgres:postgres://...)")?;
    Ok((endpoints, postgres))
}

/// Copies the store under `from` to the target `to` (etcd keys under `prefix`), with the
/// passwords `secrets` says where to find.
pub fn migrate(from: &Path, to: &str, prefix: &str, secrets: &Secrets) -> Result<()> {
    let (endpoints, url) = parse_target(to)?;
    let url = history_url(&url, secrets)?;
    let etcd_password = match &secrets.etcd_user {
        None => None,
        Some(user) => Some(Password(
            password(
                "--etcd-password-file",
                secrets.etcd_password_file.as_deref(),
                ETCD_PASSWORD_ENV,
            )?
            .with_context(|| {
                format!(
                    "--etcd-user {user} needs its password: --etcd-password-file FILE or {ETCD_PASSWORD_ENV}"
                )
            })?,
        )),
    };
    let source = Store::open(from).map_err(|e| match e.to_string() {
        m if m.contains("lock") => anyhow::anyhow!(
            "{m}: is the daemon running on {}? stop it first",
            from.display()
        ),
        m => anyhow::anyhow!(m),
    })?;
    let state = StateBackend::Etcd(EtcdConfig {
        endpoints,
        prefix: prefix.to_string(),
        username: secrets.etcd_user.clone(),
        password: etcd_password,
        ..Default::default()
    });
    let target = Store::open_with(from, 16, &state, &HistoryBackend::Postgres { url })?;
    let started = std::time::Instant::now();
    let r = source.copy_into(&target)?;
    println!(
        "copied from {} in {:.1} s",
        from.display(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "  state to etcd: {} jobs, {} plugins, {} pipeline versions, {} services, {} meta values and counters, {} queued accounting records",
        r.jobs, r.plugins, r.pipelines, r.services, r.meta, r.queued_accounting
    );
    println!(
        "  history to PostgreSQL: {} archived jobs, {} events, {} kept decisions, {} accounting records",
        r.archived_jobs, r.events, r.decisions, r.accounting
    );
    println!(
        "now set [store] backend = \"etcd\" and [history] backend = \"postgres\" in every controller's configuration"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_target_names_etcd_members_and_one_postgres_url() {
        let (e, p) =
            parse_target("etcd:http://a:2379,http://b:2379,postgres:postgres://g@db/gantry")
                .unwrap();
        assert_eq!(e, ["http://a:2379", "http://b:2379"]);
        assert_eq!(p, "postgres://g@db/gantry");
        let (e, _) = parse_target("postgres:postgres://x/y,etcd:https://a:2379").unwrap();
        assert_eq!(e, ["https://a:2379"]);
        assert!(
            parse_target("postgres:postgres://x/y")
                .unwrap_err()
                .to_string()
                .contains("etcd")
        );
        assert!(
            parse_target("etcd:http://a:2379")
                .unwrap_err()
                .to_string()
                .contains("PostgreSQL")
        );
        assert!(
            parse_target("etcd:a:2379,postgres:p")
                .unwrap_err()
                .to_string()
                .contains("http://")
        );
        assert!(parse_target("mysql:x").is_err());
    }

    #[test]
    fn a_password_comes_from_a_private_file_never_from_the_target() {
        use std::os::unix::fs::PermissionsExt;
        let none = Secrets::default();
        let err = history_url("postgres://g:pw@db/h", &none)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--history-password-file"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let secrets = Secrets {
            history_password_file: Some(file.clone()),
            ..Secrets::default()
        };
        assert!(
            std::env::var_os(HISTORY_PASSWORD_ENV).is_none(),
            "unset {HISTORY_PASSWORD_ENV} to run this test"
        );
        let url = history_url("postgres://g@db/h", &secrets).unwrap();
        assert_eq!(url, "postgres://g:s3cret@db/h");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = history_url("postgres://g@db/h", &secrets)
            .unwrap_err()
            .to_string();
        assert!(err.contains("chmod 600"), "{err}");
    }
}
