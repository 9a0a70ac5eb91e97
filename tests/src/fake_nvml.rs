//! Scenarios for the fake NVML library (`host/fake-nvml`, `docs/fake-nvml.md`): a
//! test describes a node's GPUs as JSON, points a daemon or an agent at it
//! ([`crate::Daemon::start_on_fake_nvml`], [`crate::agents::Agent::start_on_fake_nvml`]),
//! and rewrites it while they run (an Xid arrives, a GPU falls off the bus), so the daemon's
//! real NVML code path runs without a GPU.
//!
//! Owns: writing scenario files (whole, by rename, so the library never reads half of
//! one) and the `[node]` settings that load the library. Does not own the library.

use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};

/// The variable that names the scenario file to the library.
pub const SCENARIO_ENV: &str = "GANTRY_FAKE_NVML_SCENARIO";

/// A scenario file a test keeps.
pub struct FakeGpus {
    path: PathBuf,
    scenario: Value,
}

/// One GPU of a scenario: `index` makes its UUID and PCI bus id distinct.
pub fn gpu(index: u32, name: &str, memory_mib: u64) -> Value {
    json!({
        "name": name,
        "uuid": format!("GPU-{index:08x}-fake-4e56-8f00-{index:012x}"),
        "pci_bus_id": format!("00000000:{:02x}:00.0", index + 7),
        "memory_mib": memory_mib,
    })
}

impl FakeGpus {
    /// Writes `scenario` to `dir/<name>.json`.
    pub fn new(dir: &Path, name: &str, scenario: Value) -> Self {
        let fake = Self {
            path: dir.join(format!("{name}.json")),
            scenario,
        };
        fake.write();
        fake
    }

    /// A scenario of `count` GPUs named `model` with `memory_mib` each.
    pub fn uniform(dir: &Path, name: &str, count: u32, model: &str, memory_mib: u64) -> Self {
        let devices: Vec<Value> = (0..count).map(|i| gpu(i, model, memory_mib)).collect();
        Self::new(dir, name, json!({ "devices": devices, "xid_events": [] }))
    }

    /// The scenario file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The scenario as last written.
    pub fn scenario(&self) -> &Value {
        &self.scenario
    }

    /// Changes the scenario and rewrites the file.
    pub fn update(&mut self, change: impl FnOnce(&mut Value)) {
        change(&mut self.scenario);
        self.write();
    }

    /// Queues critical Xid `xid` on GPU `gpu` as event `id` (delivered once).
    pub fn xid(&mut self, id: u64, gpu: u32, xid: u64) {
        self.update(|s| {
            let events = s["xid_events"]
                .as_array_mut()
                .expect("xid_events is a list");
            events.push(json!({ "id": id, "gpu": gpu, "xid": xid }));
        });
    }

    /// Writes `text` as the scenario file as it is (e.g. something malformed).
    pub fn write_raw(&self, text: &str) {
        replace(&self.path, text.as_bytes());
    }

    fn write(&self) {
        let text = serde_json::to_vec_pretty(&self.scenario).expect("a scenario is JSON");
        replace(&self.path, &text);
    }
}

/// Replaces `path` with `bytes` by a rename.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes).expect("cannot write the scenario");
    fs::rename(&tmp, path).expect("cannot replace the scenario");
}

/// `[node]` settings that read the GPUs through the fake library, poll their health every
/// second and add `extra` lines (e.g. a `health_check`).
pub fn node_toml(extra: &str) -> String {
    format!(
        "[node]\nnvml_library = {:?}\nhealth_poll_s = 1\n{extra}\n",
        crate::fake_nvml_library().display().to_string()
    )
}
