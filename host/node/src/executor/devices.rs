//! GPU device fencing, the computation part: which of the node's GPUs a task may not touch, and
//! the character device numbers (`major:minor`) of their device nodes, read with `stat` from
//! the paths that `execution.gpu_device_pattern` names.
//!
//! Owns the deny list. It does not enforce it: the cgroup v1 devices controller (`cgroup.rs`)
//! or a BPF device program on cgroup v2 (`bpf.rs`) does.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A character device number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    /// Major number (the driver; 195 for NVIDIA GPUs).
    pub major: u32,
    /// Minor number (the device; the GPU index for NVIDIA GPUs).
    pub minor: u32,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c {}:{}", self.major, self.minor)
    }
}

/// The node's GPUs that a task given `given` must not use: every index of `node_gpus` (the
/// physical GPUs) not in `given` nor the parent of a MIG slice in it, sorted and without
/// duplicates.
pub(crate) fn denied_gpus(node_gpus: &[u32], given: &[u32]) -> Vec<u32> {
    // A MIG slice opens its parent's device node (the slice itself is chosen by its
    // `MIG-…` UUID in `CUDA_VISIBLE_DEVICES`).
    let given: Vec<u32> = given
        .iter()
        .map(|&g| gantry_api::mig::physical(g))
        .collect();
    let mut denied: Vec<u32> = node_gpus
        .iter()
        .copied()
        .filter(|g| !given.contains(g))
        .collect();
    denied.sort_unstable();
    denied.dedup();
    denied
}

/// The device node of GPU `index` under `pattern` (`{index}` replaced).
pub(crate) fn device_path(pattern: &str, index: u32) -> PathBuf {
    PathBuf::from(pattern.replace("{index}", &index.to_string()))
}

/// The device number of the character device at `path`; `None` if there is no such node or it
/// is not a character device (nothing to fence then).
pub(crate) fn char_device(path: &Path) -> Option<DeviceId> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "cannot stat GPU device node");
            }
            return None;
        }
    };
    if !meta.file_type().is_char_device() {
        tracing::warn!(path = %path.display(), "GPU device path is not a character device");
        return None;
    }
    let rdev = meta.rdev();
    Some(DeviceId {
        major: libc::major(rdev),
        minor: libc::minor(rdev),
    })
}

/// The device numbers a task given the GPUs `given` is denied, on a node with `node_gpus`,
/// whose device nodes follow `pattern`. GPUs without a device node are skipped.
pub(crate) fn denied_devices(pattern: &str, node_gpus: &[u32], given: &[u32]) -> Vec<DeviceId> {
    let mut ids: Vec<DeviceId> = denied_gpus(node_gpus, given)
        .into_iter()
        .filter_map(|g| char_device(&device_path(pattern, g)))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mig_slice_opens_its_parent_only() {
        let slice_of_1 = gantry_api::mig::slice_index(1, 2);
        assert_eq!(denied_gpus(&[0, 1, 2], &[slice_of_1]), [0, 2]);
    }

    #[test]
    fn denied_gpus_are_the_node_gpus_not_given() {
        assert_eq!(denied_gpus(&[0, 1, 2, 3], &[1]), vec![0, 2, 3]);
        assert_eq!(denied_gpus(&[3, 0, 1, 2], &[2, 0]), vec![1, 3]);
        assert_eq!(denied_gpus(&[0, 1], &[0, 1]), Vec::<u32>::new());
        assert_eq!(denied_gpus(&[], &[0]), Vec::<u32>::new());
        assert_eq!(denied_gpus(&[0, 1], &[]), vec![0, 1], "no GPU: all denied");
        assert_eq!(denied_gpus(&[1, 1, 0], &[7]), vec![0, 1]);
    }

    #[test]
    fn device_path_replaces_the_index() {
        assert_eq!(
            device_path("/dev/nvidia{index}", 12),
            PathBuf::from("/dev/nvidia12")
        );
        assert_eq!(
            device_path("/x/{index}/gpu{index}", 3),
            PathBuf::from("/x/3/gpu3")
        );
    }

    #[test]
    fn char_device_reads_real_nodes_and_skips_others() {
        assert_eq!(
            char_device(Path::new("/dev/null")),
            Some(DeviceId { major: 1, minor: 3 })
        );
        assert_eq!(char_device(Path::new("/dev/gantry-no-such-node")), None);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(char_device(&file), None, "a regular file is not fenced");
    }

    #[test]
    fn denied_devices_stat_the_pattern() {
        // /dev/null (1:3), /dev/zero (1:5), /dev/full (1:7) stand in for GPU 0, 1 and 2.
        let dir = tempfile::tempdir().unwrap();
        for (i, name) in [(0, "null"), (1, "zero"), (2, "full")] {
            std::os::unix::fs::symlink(format!("/dev/{name}"), dir.path().join(format!("g{i}")))
                .unwrap();
        }
        let pattern = format!("{}/g{{index}}", dir.path().display());
        let ids = denied_devices(&pattern, &[0, 1, 2, 3], &[1]);
        let expect = vec![
            DeviceId { major: 1, minor: 3 },
            DeviceId { major: 1, minor: 7 },
        ];
        assert_eq!(ids, expect, "GPU 3 has no node and is skipped");
        assert_eq!(ids[0].to_string(), "c 1:3");
    }
}
