//! The daemon's TOML configuration (`gantry.toml`), with a default for everything so that
//! `gantry serve` with no file runs a one-node cluster on 127.0.0.1; the token file model
//! (`auth`), the TLS settings and the client and server TLS configurations built from them
//! (`tls`), and the pipeline file format (`pipeline_file`).
//!
//! Owns: parsing, defaults and range checks of settings. Does not own discovering
//! hardware (`gantry-node`'s `inventory`) or acting on the settings (the daemon,
//! `gantry-server`, which depends on this crate; the CLI reads the same file).
//!
//! Dependency direction: this crate uses `gantry-node` (the `[node]`, `[execution]` and
//! `[containers]` tables) and `gantry-store` (the `[store]` and `[history]` backends); it
//! knows nothing of the daemon.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod agent;
pub mod auth;
pub mod authority;
pub mod cluster;
pub mod history;
pub mod http;
pub mod limits;
pub mod pipeline_file;
pub mod retention;
pub mod services;
pub mod store;
pub mod telemetry;
pub mod tls;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::telemetry::TelemetryConfig;
use gantry_node::inventory::NodeConfig;

/// Default API address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8420";

/// The data directory of a daemon run as root, when none is given.
pub const SYSTEM_DATA_DIR: &str = "/var/lib/gantry";

/// The API socket of a daemon run as root on [`SYSTEM_DATA_DIR`], found by the CLI from any
/// directory.
pub const SYSTEM_SOCKET: &str = "/run/gantry/gantry.sock";

/// The data directory when none is given: [`SYSTEM_DATA_DIR`] for root, else `gantry-data`
/// where the daemon starts.
fn default_data_dir() -> PathBuf {
    if gantry_node::sys::effective_uid() == 0 {
        PathBuf::from(SYSTEM_DATA_DIR)
    } else {
        PathBuf::from("gantry-data")
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address of the HTTP API.
    pub listen: String,
    /// Where jobs, logs, plugins and the compile cache live (made 0711: only the daemon
    /// reads it; a job's user reaches its own files by name); default `/var/lib/gantry` as
    /// root, else `gantry-data` where the daemon starts (made absolute at start).
    pub data_dir: PathBuf,
    /// The Unix socket of the API, where the kernel names the caller (default
    /// `/run/gantry/gantry.sock` on the system data directory, else `<data_dir>/gantry.sock`).
    pub socket: Option<PathBuf>,
    /// A cycle runs on every event and at least this often, in ms.
    pub cycle_interval_ms: u64,
    /// Pending jobs' start forecasts are refreshed at least this often, in seconds, and
    /// sooner after a large change (0 turns forecasts off; `docs/user/forecasts.md`).
    pub forecast_every_s: u64,
    /// Seconds between SIGTERM and SIGKILL for cancel and time limits.
    pub kill_grace_s: u64,
    /// The local node.
    pub node: NodeConfig,
    /// Default sandbox limits for plugins.
    pub plugins: PluginLimits,
    /// OpenTelemetry export (off unless an endpoint is set here or in `OTEL_EXPORTER_OTLP_*`).
    pub telemetry: TelemetryConfig,
    /// What-if replay: how many recent cycle snapshots to keep (0 turns recording off), and
    /// at most 200 job views per kept snapshot on average (the newest is always kept).
    pub record_snapshots: usize,
    /// Half-life of the decayed GPU usage given to plugins (fair-share), seconds
    /// (SLURM's `PriorityDecayHalfLife`; default 7 days).
    pub usage_half_life_s: u64,
    /// API tokens and roles (`[[auth.tokens]]`); none means no authentication, which
    /// is allowed only on loopback unless `auth.allow_unauthenticated` is set.
    pub auth: crate::auth::AuthConfig,
    /// Isolation and job-kind rules (`[execution]`).
    pub execution: gantry_node::config_execution::ExecutionConfig,
    /// HTTPS for the API (`[tls]`: `cert` and `key` PEM files, both or neither).
    pub tls: crate::tls::TlsSettings,
    /// Agents and the controller (`[cluster]`: token, local node, heartbeats).
    pub cluster: crate::cluster::ClusterConfig,
    /// Host names, connection and stream bounds of the HTTP server (`[http]`).
    pub http: crate::http::HttpSettings,
    /// What one submission, user or task may take (`[limits]`).
    pub limits: crate::limits::LimitsConfig,
    /// How long ended jobs stay in memory and on disk (`[retention]`).
    pub retention: crate::retention::RetentionConfig,
    /// Jobs in OCI images (`[containers]`: runtime, cache, allowed mounts, registries).
    pub containers: gantry_node::container::ContainersConfig,
    /// Endpoints of replicated services (`[services]`: a shared gateway, connection bounds).
    pub services: crate::services::ServicesConfig,
    /// Where history lives (`[history]`: SQLite under the data directory, or PostgreSQL).
    pub history: crate::history::HistoryConfig,
    /// Where the active state lives (`[store]`: sled under the data directory, or etcd
    /// shared by several controllers of which one leads).
    pub store: crate::store::StoreConfig,
    /// What `gantry agent` reads (`[agent]`: the controller's URL, where to listen).
    pub agent: crate::agent::AgentConfig,
}

/// Per-call sandbox limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginLimits {
    /// Deadline per call in ms.
    pub deadline_ms: u64,
    /// Memory cap per instance in MiB.
    pub memory_mib: u64,
    /// Largest `POST /v1/plugins` upload in MiB (default 64; Python components are ~17).
    pub max_upload_mib: u64,
}

impl Config {
    /// The Unix socket of the API: `socket`, else [`SYSTEM_SOCKET`] on the system data
    /// directory, else `<data_dir>/gantry.sock`.
    pub fn socket_path(&self) -> PathBuf {
        match &self.socket {
            Some(socket) => socket.clone(),
            None if self.data_dir == Path::new(SYSTEM_DATA_DIR) => PathBuf::from(SYSTEM_SOCKET),
            None => self.data_dir.join("gantry.sock"),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.into(),
            data_dir: default_data_dir(),
            socket: None,
            cycle_interval_ms: 1000,
            forecast_every_s: 30,
            usage_half_life_s: 7 * 24 * 3600,
            kill_grace_s: 10,
            node: NodeConfig::default(),
            plugins: PluginLimits::default(),
            telemetry: TelemetryConfig::default(),
            record_snapshots: 100,
            auth: crate::auth::AuthConfig::default(),
            execution: Default::default(),
            tls: Default::default(),
            cluster: Default::default(),
            http: Default::default(),
            limits: Default::default(),
            retention: Default::default(),
            containers: Default::default(),
            services: Default::default(),
            history: Default::default(),
            store: Default::default(),
            agent: Default::default(),
        }
    }
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            deadline_ms: 100,
            memory_mib: 256,
            max_upload_mib: 64,
        }
    }
}

/// Refuses a configuration file that holds a secret, the cluster token (`docs/security.md`,
/// attack U8) or the history database's password in `[history] url` (issue 43, finding
/// 14), and that its group or others may read.
fn refuse_exposed_secret(path: &Path, config: &Config) -> Result<(), ConfigError> {
    let token = !config.cluster.token.is_empty();
    let password = config.history.holds_password();
    if !token && !password {
        return Ok(());
    }
    let exposed =
        gantry_private_files::readable_by_others(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
    let Some(mode) = exposed else {
        return Ok(());
    };
    let shown = path.display();
    Err(ConfigError::Invalid(if token {
        format!(
            "{shown} holds [cluster] token but its group or others may read it (mode {mode:04o}): make it private (chmod 600)"
        )
    } else {
        format!(
            "{shown} holds the history database's password (in [history] url) but its group or others may read it (mode {mode:04o}): take the password out of the URL and put it in a file only the daemon's user may read, named by history.password_file (or in the environment variable {}), or make {shown} private (chmod 600)",
            crate::history::PASSWORD_ENV
        )
    }))
}

/// A configuration error.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown keys.
    #[error("{path}: {message}")]
    Parse {
        /// File.
        path: PathBuf,
        /// What is wrong (names the key).
        message: String,
    },
    /// A value is out of range.
    #[error("config: {0}")]
    Invalid(String),
    /// An `[[auth.tokens]]` entry is malformed.
    #[error("config: {0}")]
    Auth(#[from] crate::auth::AuthError),
    /// The `[tls]` files are missing, unreadable or hold no certificate or key.
    #[error("config: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

impl Config {
    /// Reads `path`, or returns the defaults when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let config = match path {
            None => Self::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.into(),
                    source,
                })?;
                let config: Self = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                    path: p.into(),
                    message: e.to_string(),
                })?;
                refuse_exposed_secret(p, &config)?;
                config
            }
        };
        config.check()?;
        Ok(config)
    }

    /// Range checks.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.usage_half_life_s == 0 || self.usage_half_life_s > 10 * 365 * 24 * 3600 {
            return Err(ConfigError::Invalid(
                "usage_half_life_s must be 1..=315360000 (ten years)".into(),
            ));
        }
        if self.forecast_every_s > 3600 {
            return Err(ConfigError::Invalid(
                "forecast_every_s must be 0..=3600 (0: no forecasts)".into(),
            ));
        }
        if self.cycle_interval_ms == 0 || self.cycle_interval_ms > 3_600_000 {
            return Err(ConfigError::Invalid(
                "cycle_interval_ms must be 1..=3600000".into(),
            ));
        }
        if self.node.gpus > 64 {
            return Err(ConfigError::Invalid("node.gpus must be at most 64".into()));
        }
        if self.node.unhealthy_gpus.len() > 64 || self.node.health_poll_s > 86_400 {
            return Err(ConfigError::Invalid(
                "node.unhealthy_gpus may list at most 64 GPUs; node.health_poll_s must be 0..=86400"
                    .into(),
            ));
        }
        let n = &self.node;
        if n.health_check_every_s == 0
            || n.health_check_every_s > 86_400
            || n.health_check_timeout_s == 0
            || n.health_check_timeout_s > 86_400
        {
            return Err(ConfigError::Invalid(
                "node.health_check_every_s and node.health_check_timeout_s must be 1..=86400"
                    .into(),
            ));
        }
        if n.gpu_sample_every_s > 3_600 {
            return Err(ConfigError::Invalid(
                "node.gpu_sample_every_s must be 0..=3600 (0: no sampling)".into(),
            ));
        }
        if n.health_check.first().is_some_and(|p| p.trim().is_empty()) {
            return Err(ConfigError::Invalid(
                "node.health_check names no program (its first element is empty)".into(),
            ));
        }
        if n.nvml_library
            .as_deref()
            .is_some_and(|p| p.trim().is_empty())
        {
            return Err(ConfigError::Invalid(
                "node.nvml_library is empty; leave it out to load the driver's libnvidia-ml.so.1"
                    .into(),
            ));
        }
        if self.record_snapshots > 10_000 {
            return Err(ConfigError::Invalid(
                "record_snapshots must be at most 10000".into(),
            ));
        }
        if !matches!(
            self.telemetry.protocol.as_str(),
            "" | "http/protobuf" | "grpc"
        ) {
            return Err(ConfigError::Invalid(
                "telemetry.protocol must be \"http/protobuf\" or \"grpc\"".into(),
            ));
        }
        if self.plugins.deadline_ms == 0 || self.plugins.memory_mib < 16 {
            return Err(ConfigError::Invalid(
                "plugins.deadline_ms must be > 0 and plugins.memory_mib >= 16".into(),
            ));
        }
        if self.plugins.max_upload_mib == 0 || self.plugins.max_upload_mib > 1024 {
            return Err(ConfigError::Invalid(
                "plugins.max_upload_mib must be 1..=1024".into(),
            ));
        }
        self.execution.check().map_err(ConfigError::Invalid)?;
        self.cluster.check().map_err(ConfigError::Invalid)?;
        self.http.check().map_err(ConfigError::Invalid)?;
        self.limits.check().map_err(ConfigError::Invalid)?;
        self.retention.check().map_err(ConfigError::Invalid)?;
        self.containers.check().map_err(ConfigError::Invalid)?;
        self.services.check().map_err(ConfigError::Invalid)?;
        self.history.check().map_err(ConfigError::Invalid)?;
        self.store.check().map_err(ConfigError::Invalid)?;
        self.agent.check().map_err(ConfigError::Invalid)?;
        if self.store.backend == "etcd" && self.cluster.local_node {
            // A leader's own tasks would outlive it unmanaged: the next leader has no runner
            // on that machine (measured: 50 of 50 marked failed, their processes running).
            return Err(ConfigError::Invalid(
                "cluster.local_node must be false with store.backend = \"etcd\": several controllers lead in turn, and the tasks of a controller's own node would be left running unmanaged when it dies; run tasks on agents (gantry agent join on this machine too)".into(),
            ));
        }
        crate::auth::check_tokens(&self.auth)?;
        crate::tls::ServerTls::load(&self.tls)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_example_config_loads_and_a_zero_half_life_is_refused() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gantry.toml");
        let config = Config::load(Some(&example)).unwrap();
        assert_eq!(config.usage_half_life_s, 604_800);
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("gantry.toml");
        std::fs::write(&bad, "usage_half_life_s = 0\n").unwrap();
        let e = Config::load(Some(&bad)).unwrap_err().to_string();
        assert!(e.contains("usage_half_life_s"), "{e}");
        // Forecasts: every 30 s by default, 0 turns them off, more than an hour is refused.
        assert_eq!(config.forecast_every_s, 30);
        std::fs::write(&bad, "forecast_every_s = 3601\n").unwrap();
        let e = Config::load(Some(&bad)).unwrap_err().to_string();
        assert!(e.contains("forecast_every_s"), "{e}");
        std::fs::write(&bad, "forecast_every_s = 0\n").unwrap();
        assert_eq!(Config::load(Some(&bad)).unwrap().forecast_every_s, 0);
    }

    #[test]
    fn several_controllers_run_no_tasks_on_their_own_nodes() {
        let on_etcd = |cluster: &str| -> Result<Config, toml::de::Error> {
            toml::from_str(&format!(
                "{cluster}[store]\nbackend = \"etcd\"\nendpoints = [\"http://a:2379\"]\netcd_isolated = true\n"
            ))
        };
        let e = on_etcd("").unwrap().check().unwrap_err().to_string();
        assert!(e.contains("cluster.local_node must be false"), "{e}");
        on_etcd("[cluster]\nlocal_node = false\n")
            .unwrap()
            .check()
            .unwrap();
    }

    #[test]
    fn a_history_password_in_a_config_others_may_read_is_refused_naming_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gantry.toml");
        let with = "[history]\nbackend = \"postgres\"\nurl = \"postgres://g:s3cret@db/h\"\n";
        std::fs::write(&file, with).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Config::load(Some(&file)).unwrap_err().to_string();
        assert!(
            e.contains("history.password_file") && e.contains("GANTRY_HISTORY_PASSWORD"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        Config::load(Some(&file)).unwrap();
        // Without a password in it, the file may be read by anyone.
        std::fs::write(&file, with.replace(":s3cret", "")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        Config::load(Some(&file)).unwrap();
    }

    #[test]
    fn a_config_file_with_a_bad_tls_table_is_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gantry.toml");
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, "junk").unwrap();
        let text = format!("[tls]\ncert = {:?}\n", cert.display().to_string());
        std::fs::write(&file, &text).unwrap();
        let e = Config::load(Some(&file)).unwrap_err().to_string();
        assert!(
            e.contains("tls.key must be set together with tls.cert"),
            "{e}"
        );
        std::fs::write(
            &file,
            format!("{text}key = {:?}\n", cert.display().to_string()),
        )
        .unwrap();
        let e = Config::load(Some(&file)).unwrap_err().to_string();
        assert!(
            e.contains("tls.cert") && e.contains("holds no PEM certificate"),
            "{e}"
        );
        std::fs::write(&file, "[tls]\ncrt = \"x\"\n").unwrap();
        let e = Config::load(Some(&file)).unwrap_err().to_string();
        assert!(e.contains("crt"), "{e}");
    }
}
