//! The `[history]` section of the configuration: where the controller keeps what grows
//! with time — the records of jobs that left memory, the event log, decisions and
//! accounting (`gantry-store`'s history interface, `host/store/src/sql.rs`).
//!
//! - `backend = "sqlite"` (the default): one SQLite file under the data directory.
//! - `backend = "postgres"` with `url = "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"`,
//!   or `url_file = "/etc/gantry/history-url"` (a file holding that string, readable by
//!   the daemon's user only, so a password stays out of the configuration file): a
//!   PostgreSQL server, as slurmdbd keeps SLURM's history in MariaDB. Tables are created at
//!   the first start; the database must exist and the user must be allowed to create
//!   tables in it. The connection is plain TCP (or a Unix socket: `host=/run/postgresql`):
//!   run the server on the controller's machine or a trusted network.
//! - The password: not in a configuration file others may read (`config.rs` refuses
//!   that at start, as for the cluster token), but in `password_file` (mode 0600; its
//!   first line), in the environment variable `GANTRY_HISTORY_PASSWORD`, in a private
//!   `url_file`, or in the URL of a private configuration file; once, not twice.
//!
//! Owns: these settings and their checks. Does not own the databases (`gantry-store`).

use gantry_store::HistoryBackend;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where history lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// `sqlite` (default) or `postgres`.
    pub backend: String,
    /// PostgreSQL's connection string.
    pub url: Option<String>,
    /// Or a file holding it (mode 0600 or stricter).
    pub url_file: Option<PathBuf>,
    /// A file (mode 0600 or stricter) whose first line is the password of the URL's user.
    pub password_file: Option<PathBuf>,
}

/// The environment variable that may hold the history database's password.
pub const PASSWORD_ENV: &str = "GANTRY_HISTORY_PASSWORD";

impl Default for HistoryConfig {
    fn default() -> Self {
        Self {
            backend: "sqlite".into(),
            url: None,
            url_file: None,
            password_file: None,
        }
    }
}

impl HistoryConfig {
    /// Consistency checks, as messages naming the key (the file is read at start).
    pub fn check(&self) -> Result<(), String> {
        match (self.backend.as_str(), &self.url, &self.url_file) {
            ("sqlite", None, None) if self.password_file.is_none() => Ok(()),
            ("sqlite", _, _) => {
                Err("history.url, history.url_file and history.password_file are for backend = \"postgres\"".into())
            }
            ("postgres", Some(_), Some(_)) => Err("history: give url or url_file, not both".into()),
            ("postgres", None, None) => Err(
                "history.url (or history.url_file) is required with backend = \"postgres\"".into(),
            ),
            ("postgres", _, _) => Ok(()),
            (other, _, _) => Err(format!(
                "history.backend must be \"sqlite\" or \"postgres\", not {other:?}"
            )),
        }
    }

    /// The store's history backend, reading `url_file` when set.
    pub fn backend(&self) -> Result<HistoryBackend, String> {
        self.check()?;
        if self.backend == "sqlite" {
            return Ok(HistoryBackend::Sqlite);
        }
        let url = match (&self.url, &self.url_file) {
            (Some(url), _) => url.clone(),
            (None, Some(path)) => read_url_file(path)?,
            (None, None) => return Err("history.url is required".into()),
        };
        let password = match (
            &self.password_file,
            gantry_store::secret_file::from_env(PASSWORD_ENV),
        ) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "history.password_file and {PASSWORD_ENV} are both set: give the password once"
                ));
            }
            (Some(path), None) => Some(
                gantry_store::secret_file::read_private("history.password_file", path)
                    .map_err(|e| e.to_string())?,
            ),
            (None, from_env) => from_env,
        };
        let url = match password {
            Some(password) => gantry_store::postgres_secret::with_password(&url, &password)
                .map_err(|e| e.to_string())?,
            None => url,
        };
        Ok(HistoryBackend::Postgres { url })
    }

    /// Whether the configuration file itself holds the database's password (in `url`).
    pub fn holds_password(&self) -> bool {
        self.url
            .as_deref()
            .is_some_and(gantry_store::postgres_secret::url_has_password)
    }
}

fn read_url_file(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("history.url_file {shown}: {e}"))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "history.url_file {shown} is readable by others (mode {:o}): chmod 600 it",
            meta.mode() & 0o777
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("history.url_file {shown}: {e}"))?;
    let url = text.trim();
    if url.is_empty() {
        return Err(format!("history.url_file {shown} is empty"));
    }
    Ok(url.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn defaults_to_sqlite_and_names_the_key_of_each_mistake() {
        assert_eq!(
            HistoryConfig::default().backend().unwrap(),
            HistoryBackend::Sqlite
        );
        let parse = |t: &str| toml::from_str::<HistoryConfig>(t).unwrap();
        assert!(
            parse("backend = \"mysql\"")
                .check()
                .unwrap_err()
                .contains("history.backend")
        );
        assert!(
            parse("backend = \"postgres\"")
                .check()
                .unwrap_err()
                .contains("history.url")
        );
        assert!(
            parse("url = \"postgres://x\"")
                .check()
                .unwrap_err()
                .contains("backend = \"postgres\"")
        );
        assert_eq!(
            parse("backend = \"postgres\"\nurl = \"postgres://g@127.0.0.1/h\"")
                .backend()
                .unwrap(),
            HistoryBackend::Postgres {
                url: "postgres://g@127.0.0.1/h".into()
            }
        );
        assert!(toml::from_str::<HistoryConfig>("uri = \"x\"").is_err());
    }

    #[test]
    fn a_url_file_must_be_private() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("url");
        std::fs::write(&file, "postgres://g:pw@127.0.0.1/h\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let config = HistoryConfig {
            backend: "postgres".into(),
            url: None,
            url_file: Some(file.clone()),
            password_file: None,
        };
        assert!(config.backend().unwrap_err().contains("chmod 600"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            config.backend().unwrap(),
            HistoryBackend::Postgres {
                url: "postgres://g:pw@127.0.0.1/h".into()
            }
        );
    }
}
