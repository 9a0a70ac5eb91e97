//! The device fence of MIG slices. A task given a slice opens its parent GPU's device node
//! (`devices.rs`), and the driver lets a process into a MIG instance only through that
//! instance's capability devices (`/dev/nvidia-caps/nvidia-cap<N>`): one for its GPU
//! instance (`gpu<G>/gi<I>/access`) and one for its compute instance
//! (`gpu<G>/gi<I>/ci<C>/access`), whose minors the driver lists in
//! `/proc/driver/nvidia-caps/mig-minors` under the major `nvidia-caps` of `/proc/devices`.
//! Without this fence, a task given one slice of a GPU could open every other slice of it.
//!
//! A task is denied the capability devices of every slice on the node it was not given,
//! except a GPU instance's when a slice it was given shares that instance. The numbers are
//! denied whether or not the device nodes exist yet (`nvidia-modprobe` makes them on
//! demand).
//!
//! Owns: reading the driver's tables and the capability deny list. Does not own enforcing
//! it (`cgroup.rs`, `bpf.rs`) nor the GPU device nodes (`devices.rs`).

use super::devices::DeviceId;
use gantry_api::node::GpuInfo;
use std::collections::{BTreeMap, BTreeSet};

/// Where the driver lists capability minors.
pub const MIG_MINORS: &str = "/proc/driver/nvidia-caps/mig-minors";

/// One slice's capability devices.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SliceCaps {
    /// Its GPU instance: (physical GPU, GI id), shared by the CIs of one GI.
    instance: (u32, u32),
    /// The GPU instance's access device.
    gi: DeviceId,
    /// The compute instance's access device.
    ci: DeviceId,
}

/// The capability devices of a node's MIG slices, by slice index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigCaps {
    by_slice: BTreeMap<u32, SliceCaps>,
}

impl MigCaps {
    /// No MIG slices (or none whose capabilities are known).
    pub fn none() -> Self {
        Self::default()
    }

    /// The capabilities of `gpus`' MIG slices from the driver's tables on this machine; a
    /// node with slices whose capabilities cannot be read logs why (its slices are then
    /// fenced by their parent's device node only).
    pub fn read(gpus: &[GpuInfo]) -> Self {
        if !gpus
            .iter()
            .any(|g| g.mig_enabled && !g.mig_devices.is_empty())
        {
            return Self::none();
        }
        let minors = std::fs::read_to_string(MIG_MINORS);
        let devices = std::fs::read_to_string("/proc/devices");
        match (minors, devices) {
            (Ok(m), Ok(d)) => {
                let caps = Self::from_tables(gpus, &m, &d);
                tracing::info!(
                    slices = caps.by_slice.len(),
                    "MIG slices fenced by their capability devices"
                );
                caps
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(
                    "MIG capability devices unknown ({MIG_MINORS} or /proc/devices: {e}); a task given a slice can reach the other slices of its GPU"
                );
                Self::none()
            }
        }
    }

    /// The capabilities of `gpus`' slices from the texts of `mig-minors` and
    /// `/proc/devices`.
    pub fn from_tables(gpus: &[GpuInfo], mig_minors: &str, proc_devices: &str) -> Self {
        let Some(major) = caps_major(proc_devices) else {
            tracing::warn!(
                "no nvidia-caps major in /proc/devices: MIG capabilities are not fenced"
            );
            return Self::none();
        };
        let minors = parse_minors(mig_minors);
        let mut by_slice = BTreeMap::new();
        for g in gpus.iter().filter(|g| g.mig_enabled) {
            for m in &g.mig_devices {
                let index = gantry_api::mig::slice_index(g.index, m.slot);
                let (Some(gi), Some(ci)) = (m.gpu_instance, m.compute_instance) else {
                    tracing::warn!(
                        slice = index,
                        "a MIG slice without instance ids is not fenced"
                    );
                    continue;
                };
                let gi_key = format!("gpu{}/gi{gi}/access", g.index);
                let ci_key = format!("gpu{}/gi{gi}/ci{ci}/access", g.index);
                let (Some(&gi_minor), Some(&ci_minor)) = (minors.get(&gi_key), minors.get(&ci_key))
                else {
                    tracing::warn!(slice = index, "{gi_key} or {ci_key} is not in {MIG_MINORS}");
                    continue;
                };
                let dev = |minor| DeviceId { major, minor };
                by_slice.insert(
                    index,
                    SliceCaps {
                        instance: (g.index, gi),
                        gi: dev(gi_minor),
                        ci: dev(ci_minor),
                    },
                );
            }
        }
        Self { by_slice }
    }

    /// The capability devices a task given the devices `given` must not open: every slice's
    /// not given, but a GPU instance's that a given slice shares.
    pub(crate) fn denied(&self, given: &[u32]) -> Vec<DeviceId> {
        let kept: BTreeSet<(u32, u32)> = given
            .iter()
            .filter_map(|i| self.by_slice.get(i))
            .map(|c| c.instance)
            .collect();
        let mut out: BTreeSet<DeviceId> = BTreeSet::new();
        for (index, c) in &self.by_slice {
            if given.contains(index) {
                continue;
            }
            out.insert(c.ci);
            if !kept.contains(&c.instance) {
                out.insert(c.gi);
            }
        }
        out.into_iter().collect()
    }
}

/// The major number of `nvidia-caps` in a `/proc/devices` text.
fn caps_major(proc_devices: &str) -> Option<u32> {
    proc_devices.lines().find_map(|l| {
        let (num, name) = l.trim().split_once(' ')?;
        (name.trim() == "nvidia-caps").then(|| num.parse().ok())?
    })
}

/// `name minor` lines of `mig-minors`.
fn parse_minors(text: &str) -> BTreeMap<String, u32> {
    text.lines()
        .filter_map(|l| {
            let (name, minor) = l.trim().split_once(' ')?;
            Some((name.to_string(), minor.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::node::MigDevice;

    const DEVICES: &str =
        "Character devices:\n  1 mem\n195 nvidia\n234 nvidia-caps\n510 nvidia-uvm\n";

    /// The driver numbers caps in order; these are as a real `mig-minors` reads.
    const MINORS: &str = "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n\
gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi2/ci1/access 23\ngpu1/gi1/access 147\n\
gpu1/gi1/ci0/access 148\n";

    fn slice(parent: u32, slot: u32, gi: u32, ci: u32) -> MigDevice {
        MigDevice {
            parent_index: parent,
            slot,
            gpu_instance: Some(gi),
            compute_instance: Some(ci),
            uuid: format!("MIG-{parent}-{slot}"),
            profile: "1g.10gb".into(),
            name: "NVIDIA A100 MIG 1g.10gb".into(),
            memory_mib: 9_856,
        }
    }

    fn gpus() -> Vec<GpuInfo> {
        let mut a = GpuInfo::configured(0, "NVIDIA A100", 81_920);
        a.mig_enabled = true;
        // Slot 0: GI 1 / CI 0; slots 1 and 2: two CIs of GI 2.
        a.mig_devices = vec![slice(0, 0, 1, 0), slice(0, 1, 2, 0), slice(0, 2, 2, 1)];
        let mut b = GpuInfo::configured(1, "NVIDIA A100", 81_920);
        b.mig_enabled = true;
        b.mig_devices = vec![slice(1, 0, 1, 0)];
        vec![a, b, GpuInfo::configured(2, "NVIDIA A100", 81_920)]
    }

    fn caps(minors: &[u32]) -> Vec<DeviceId> {
        minors
            .iter()
            .map(|&minor| DeviceId { major: 234, minor })
            .collect()
    }

    #[test]
    fn a_slice_keeps_its_own_caps_and_loses_every_other_slices() {
        let c = MigCaps::from_tables(&gpus(), MINORS, DEVICES);
        let s = gantry_api::mig::slice_index;
        // Slot 0 of GPU 0: the rest of GPU 0 and GPU 1's slice are denied.
        assert_eq!(c.denied(&[s(0, 0)]), caps(&[21, 22, 23, 147, 148]));
        // One CI of GI 2: the GI stays open, the other CI does not.
        assert_eq!(c.denied(&[s(0, 1)]), caps(&[12, 13, 23, 147, 148]));
        // A whole GPU (2) or no GPU: every slice's caps are denied.
        assert_eq!(c.denied(&[2]), caps(&[12, 13, 21, 22, 23, 147, 148]));
        assert_eq!(c.denied(&[]), caps(&[12, 13, 21, 22, 23, 147, 148]));
    }

    #[test]
    fn missing_tables_or_ids_fence_nothing_more() {
        assert_eq!(
            MigCaps::from_tables(&gpus(), MINORS, "Character devices:\n195 nvidia\n"),
            MigCaps::none()
        );
        // A slice missing from the table is left out; the others are kept.
        let c = MigCaps::from_tables(
            &gpus(),
            "gpu1/gi1/access 147\ngpu1/gi1/ci0/access 148\n",
            DEVICES,
        );
        assert_eq!(c.denied(&[]), caps(&[147, 148]));
        assert_eq!(
            MigCaps::read(&[GpuInfo::configured(0, "x", 1)]),
            MigCaps::none()
        );
    }
}
