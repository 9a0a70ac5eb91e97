//! The scenario file: its format (serde types, unknown fields refused, defaults for the
//! optional fields), reading it and validating it. A refused scenario is a
//! [`ScenarioError`] whose message names the field and the problem.
//!
//! Owns: the format and its rules. Does not own when the file is read again (`state.rs`),
//! the device handles (`devices.rs`) or what NVML answers from it (the `ffi_*` modules).

use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The environment variable that names the scenario file.
pub const SCENARIO_VAR: &str = "GANTRY_FAKE_NVML_SCENARIO";

/// The driver version answered when the scenario names none.
pub const DEFAULT_DRIVER_VERSION: &str = "550.54.15";

/// The most MIG devices one GPU holds (an A100 or H100 holds seven); also what
/// `nvmlDeviceGetMaxMigDeviceCount` answers.
pub const MAX_MIG_DEVICES: usize = 7;

/// The most NVLinks of one GPU (`NVML_NVLINK_MAX_LINKS`).
pub const MAX_NVLINKS: usize = nvml_wrapper_sys::bindings::NVML_NVLINK_MAX_LINKS as usize;

/// Why a scenario was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read the scenario {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("malformed scenario: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A whole scenario: the driver, the GPUs in NVML's index order, the Xid events.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_driver_version")]
    pub driver_version: String,
    #[serde(default)]
    pub devices: Vec<Gpu>,
    #[serde(default)]
    pub xid_events: Vec<XidEvent>,
}

fn default_driver_version() -> String {
    DEFAULT_DRIVER_VERSION.to_string()
}

/// One GPU; its NVML index is its place in `devices`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub name: String,
    pub uuid: String,
    /// `00000000:07:00.0`; when left out, `00000000:XX:00.0` with XX the index plus one.
    #[serde(default)]
    pub pci_bus_id: String,
    pub memory_mib: u64,
    #[serde(default)]
    pub used_memory_mib: u64,
    /// Link `i` is entry `i`: the remote bus id of an active link, or `null` for an
    /// inactive one. Links past the end are inactive.
    #[serde(default)]
    pub nvlinks: Vec<Option<String>>,
    #[serde(default)]
    pub utilization: Utilization,
    #[serde(default)]
    pub processes: Vec<Process>,
    #[serde(default)]
    pub ecc_uncorrected_volatile: u64,
    #[serde(default)]
    pub retired_pages_pending: bool,
    #[serde(default)]
    pub remapped_rows: RemappedRows,
    #[serde(default)]
    pub lost: bool,
    /// Left out: the GPU is not MIG-capable (the MIG calls answer NOT_SUPPORTED).
    #[serde(default)]
    pub mig: Option<Mig>,
}

/// Utilization rates in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    #[serde(default)]
    pub gpu: u32,
    #[serde(default)]
    pub memory: u32,
}

/// A process with a compute context, and its utilization samples.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    #[serde(default)]
    pub used_memory_mib: u64,
    #[serde(default)]
    pub sm_util: u32,
    #[serde(default)]
    pub mem_util: u32,
}

/// What `nvmlDeviceGetRemappedRows` answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemappedRows {
    #[serde(default)]
    pub correctable: u32,
    #[serde(default)]
    pub uncorrectable: u32,
    #[serde(default)]
    pub pending: bool,
    #[serde(default)]
    pub failure: bool,
}

/// A MIG-capable GPU: its mode and, when on, its MIG devices (slot `i` is entry `i`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mig {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub devices: Vec<MigDevice>,
}

/// One MIG device; its name is `<parent name> MIG <profile>`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    pub profile: String,
    pub uuid: String,
    pub memory_mib: u64,
    #[serde(default)]
    pub used_memory_mib: u64,
    #[serde(default)]
    pub processes: Vec<Process>,
}

/// A critical Xid on GPU `gpu`, delivered once per process (by `id`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidEvent {
    pub id: u64,
    pub gpu: u32,
    pub xid: u64,
}

impl Gpu {
    /// The MIG devices, empty when MIG is off or the GPU is not MIG-capable.
    pub fn mig_devices(&self) -> &[MigDevice] {
        self.mig.as_ref().map_or(&[], |m| m.devices.as_slice())
    }
}

/// Reads and validates the scenario at `path`.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text)
}

/// Parses and validates a scenario; fills the defaults that depend on a GPU's index.
pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    let mut scenario: Scenario = serde_json::from_str(text)?;
    for (i, gpu) in scenario.devices.iter_mut().enumerate() {
        if gpu.pci_bus_id.is_empty() {
            gpu.pci_bus_id = format!("00000000:{:02X}:00.0", i + 1);
        }
    }
    validate(&scenario)?;
    Ok(scenario)
}

fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    text_field("driver_version", &s.driver_version)?;
    let mut uuids: HashMap<&str, String> = HashMap::new();
    for (i, gpu) in s.devices.iter().enumerate() {
        let at = format!("devices[{i}]");
        validate_gpu(&at, gpu)?;
        claim(&mut uuids, &gpu.uuid, format!("{at}.uuid"))?;
        for (m, mig) in gpu.mig_devices().iter().enumerate() {
            claim(&mut uuids, &mig.uuid, format!("{at}.mig.devices[{m}].uuid"))?;
        }
    }
    let mut ids: HashMap<u64, usize> = HashMap::new();
    for (i, ev) in s.xid_events.iter().enumerate() {
        if ev.gpu as usize >= s.devices.len() {
            return Err(invalid(
                format!("xid_events[{i}].gpu"),
                format!(
                    "GPU index {} is out of range (the scenario has {} devices)",
                    ev.gpu,
                    s.devices.len()
                ),
            ));
        }
        if let Some(first) = ids.insert(ev.id, i) {
            return Err(invalid(
                format!("xid_events[{i}].id"),
                format!("the id {} is also the id of xid_events[{first}]", ev.id),
            ));
        }
    }
    Ok(())
}

/// Records that `field` holds `uuid`; refused when another field already does.
fn claim<'s>(
    uuids: &mut HashMap<&'s str, String>,
    uuid: &'s str,
    field: String,
) -> Result<(), ScenarioError> {
    if let Some(first) = uuids.get(uuid) {
        return Err(invalid(
            field,
            format!("the uuid {uuid:?} is also the uuid of {first}"),
        ));
    }
    uuids.insert(uuid, field);
    Ok(())
}

fn validate_gpu(at: &str, gpu: &Gpu) -> Result<(), ScenarioError> {
    text_field(&format!("{at}.name"), &gpu.name)?;
    uuid_field(&format!("{at}.uuid"), &gpu.uuid)?;
    bus_id_field(&format!("{at}.pci_bus_id"), &gpu.pci_bus_id)?;
    if gpu.nvlinks.len() > MAX_NVLINKS {
        return Err(invalid(
            format!("{at}.nvlinks"),
            format!("{} links, more than {MAX_NVLINKS}", gpu.nvlinks.len()),
        ));
    }
    for (l, remote) in gpu.nvlinks.iter().enumerate() {
        if let Some(remote) = remote {
            bus_id_field(&format!("{at}.nvlinks[{l}]"), remote)?;
        }
    }
    percent(&format!("{at}.utilization.gpu"), gpu.utilization.gpu)?;
    percent(&format!("{at}.utilization.memory"), gpu.utilization.memory)?;
    processes(&format!("{at}.processes"), &gpu.processes)?;
    let Some(mig) = &gpu.mig else { return Ok(()) };
    if !mig.enabled && !mig.devices.is_empty() {
        return Err(invalid(
            format!("{at}.mig.devices"),
            "MIG devices on a GPU whose MIG mode is off (mig.enabled is false)",
        ));
    }
    if mig.devices.len() > MAX_MIG_DEVICES {
        return Err(invalid(
            format!("{at}.mig.devices"),
            format!(
                "{} MIG devices, more than {MAX_MIG_DEVICES}",
                mig.devices.len()
            ),
        ));
    }
    for (m, dev) in mig.devices.iter().enumerate() {
        let at = format!("{at}.mig.devices[{m}]");
        text_field(&format!("{at}.profile"), &dev.profile)?;
        uuid_field(&format!("{at}.uuid"), &dev.uuid)?;
        processes(&format!("{at}.processes"), &dev.processes)?;
    }
    Ok(())
}

fn text_field(field: &str, value: &str) -> Result<(), ScenarioError> {
    if value.contains('\0') {
        return Err(invalid(field, "contains a NUL character"));
    }
    Ok(())
}

fn uuid_field(field: &str, value: &str) -> Result<(), ScenarioError> {
    if value.trim().is_empty() {
        return Err(invalid(field, "is empty"));
    }
    text_field(field, value)
}

/// `DDDDDDDD:BB:DD.F` (4 to 8 hex digits of domain, any case).
fn bus_id_field(field: &str, value: &str) -> Result<(), ScenarioError> {
    if parse_bus_id(value).is_none() {
        return Err(invalid(
            field,
            format!("{value:?} is not a PCI bus id like 00000000:07:00.0"),
        ));
    }
    Ok(())
}

/// The domain, bus, device and function of a bus id, or `None` when it is not one.
pub fn parse_bus_id(value: &str) -> Option<(u32, u32, u32, u32)> {
    let hex = |s: &str, min: usize, max: usize| {
        (s.len() >= min && s.len() <= max && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
    };
    let mut parts = value.split(':');
    let (domain, bus, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (device, function) = rest.split_once('.')?;
    let function = hex(function, 1, 1).filter(|f| *f < 8)?;
    Some((
        hex(domain, 4, 8)?,
        hex(bus, 2, 2)?,
        hex(device, 2, 2)?,
        function,
    ))
}

fn percent(field: &str, value: u32) -> Result<(), ScenarioError> {
    if value > 100 {
        return Err(invalid(field, format!("{value} is over 100 (percent)")));
    }
    Ok(())
}

fn processes(at: &str, list: &[Process]) -> Result<(), ScenarioError> {
    for (p, proc_) in list.iter().enumerate() {
        percent(&format!("{at}[{p}].sm_util"), proc_.sm_util)?;
        percent(&format!("{at}[{p}].mem_util"), proc_.mem_util)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
