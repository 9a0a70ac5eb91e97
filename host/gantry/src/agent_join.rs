//! `gantry agent join`, after the join (`gantry_enrol::join`): how the new agent starts. With
//! systemd running and the package's `gantry-agent.service` installed, on the default
//! configuration path, the unit is enabled and started (`systemctl enable --now`), as k3s's
//! installer does; otherwise the agent runs here, in the foreground, on the written
//! configuration. `--no-start` writes the configuration only.
//!
//! Owns: that choice. Does not own the join or the agent.

use anyhow::{Context, bail};
use std::path::Path;

const DEFAULT_CONFIG: &str = "/etc/gantry/agent.toml";
const UNIT: &str = "gantry-agent.service";

/// Joins; then the agent's arguments to run it here, or `None` when it was started by
/// systemd or is not to be started.
pub(crate) fn join_then(
    join: &gantry_enrol::join::JoinArgs,
) -> anyhow::Result<Option<gantry_agent::AgentArgs>> {
    let joined = gantry_enrol::join::join(join)?;
    println!(
        "joined as node {}; configuration in {}",
        joined.node,
        joined.config.display()
    );
    if join.no_start {
        println!(
            "start it with: gantry agent --config {}",
            joined.config.display()
        );
        return Ok(None);
    }
    let under_systemd = Path::new("/run/systemd/system").is_dir()
        && joined.config == Path::new(DEFAULT_CONFIG)
        && [
            "/lib/systemd/system",
            "/usr/lib/systemd/system",
            "/etc/systemd/system",
        ]
        .iter()
        .any(|d| Path::new(d).join(UNIT).exists());
    if under_systemd {
        let status = std::process::Command::new("systemctl")
            .args(["enable", "--now", UNIT])
            .status()
            .context("cannot run systemctl")?;
        if !status.success() {
            bail!("systemctl enable --now {UNIT} failed ({status}); see journalctl -u {UNIT}");
        }
        println!("started {UNIT}");
        return Ok(None);
    }
    Ok(Some(gantry_agent::AgentArgs {
        controller: None,
        config: Some(joined.config),
        listen: None,
        advertise: None,
        data_dir: None,
        name: None,
        gpus: None,
        no_nvml: false,
    }))
}
