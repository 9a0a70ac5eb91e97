//! NVLink topology of the local node: which GPU each active link reaches (by the
//! remote PCI bus id), GPU groups as the connected components of that link graph, and
//! the `gantry.io/gpu-groups` label value the `backfill` plugin's topology scoring reads
//! (`|`-separated groups of comma-separated indices or `a-b` ranges, e.g. `0-3|4-7`).
//!
//! A link whose remote end is not a GPU of this node (an NVSwitch, as on HGX boards)
//! joins every GPU linked to that same remote end: a fully NVLinked 8-GPU box, direct
//! or through switches, is one group; two 4-GPU islands are two.
//!
//! Owns: these pure computations over [`GpuInfo`] records. Does not own reading links
//! from the driver (`nvml.rs`) or whether the label is set (`mod.rs`: config wins).

use super::GpuInfo;
use std::collections::BTreeMap;

/// The label the `backfill` plugin reads GPU groups from.
pub const GPU_GROUPS_LABEL: &str = "gantry.io/gpu-groups";

/// A PCI bus id in one spelling (`0000:07:00.0`, lowercase, 4-digit domain), so the
/// driver's 8-digit (`00000000:07:00.0`) and 4-digit forms compare equal. Text that
/// is not a bus id is returned lowercased and trimmed.
pub fn normalize_bus_id(raw: &str) -> String {
    let text = raw.trim().to_ascii_lowercase();
    let Some((domain, rest)) = text.split_once(':') else {
        return text;
    };
    match u32::from_str_radix(domain, 16) {
        Ok(d) if rest.contains(':') => format!("{d:04x}:{rest}"),
        _ => text,
    }
}

/// Fills `peer_index` of every link whose remote bus id is another GPU of `gpus`.
pub fn resolve_peers(gpus: &mut [GpuInfo]) {
    let by_bus: BTreeMap<String, u32> = gpus
        .iter()
        .filter_map(|g| Some((normalize_bus_id(g.pci_bus_id.as_deref()?), g.index)))
        .collect();
    for g in gpus.iter_mut() {
        for link in &mut g.nvlinks {
            link.peer_index = by_bus
                .get(&normalize_bus_id(&link.remote_pci_bus_id))
                .copied()
                .filter(|&peer| peer != g.index);
        }
    }
}

/// Union-find over `n` elements.
struct Components {
    parent: Vec<usize>,
}

impl Components {
    fn new(n: usize) -> Self {
        Self {
            parent: (0..n).collect(),
        }
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra != rb {
            self.parent[ra.max(rb)] = ra.min(rb);
        }
    }
}

/// GPU groups: connected components of the NVLink graph (GPU↔GPU links, and GPUs
/// sharing a remote end that is not a local GPU). Each group's indices are sorted and
/// groups are ordered by their lowest index; a GPU without links is a group of one.
pub fn nvlink_groups(gpus: &[GpuInfo]) -> Vec<Vec<u32>> {
    let pos: BTreeMap<u32, usize> = gpus.iter().enumerate().map(|(p, g)| (g.index, p)).collect();
    let mut sets = Components::new(gpus.len());
    let mut first_on_remote: BTreeMap<String, usize> = BTreeMap::new();
    for (p, g) in gpus.iter().enumerate() {
        for link in &g.nvlinks {
            match link.peer_index.and_then(|i| pos.get(&i)) {
                Some(&q) => sets.join(p, q),
                None => {
                    let remote = normalize_bus_id(&link.remote_pci_bus_id);
                    let q = *first_on_remote.entry(remote).or_insert(p);
                    sets.join(p, q);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (p, g) in gpus.iter().enumerate() {
        let root = sets.root(p);
        groups.entry(root).or_default().push(g.index);
    }
    let mut out: Vec<Vec<u32>> = groups
        .into_values()
        .map(|mut g| {
            g.sort_unstable();
            g
        })
        .collect();
    out.sort();
    out
}

/// GPUs that `gpu` reaches over NVLink in one hop, or through a remote end (switch)
/// it shares with them; sorted.
pub fn nvlink_peers(gpus: &[GpuInfo], gpu: &GpuInfo) -> Vec<u32> {
    let remotes = |g: &GpuInfo| -> Vec<String> {
        g.nvlinks
            .iter()
            .filter(|l| l.peer_index.is_none())
            .map(|l| normalize_bus_id(&l.remote_pci_bus_id))
            .collect()
    };
    let mine = remotes(gpu);
    let mut peers: Vec<u32> = gpu.nvlinks.iter().filter_map(|l| l.peer_index).collect();
    for other in gpus.iter().filter(|o| o.index != gpu.index) {
        let direct_back = other
            .nvlinks
            .iter()
            .any(|l| l.peer_index == Some(gpu.index));
        if direct_back || remotes(other).iter().any(|r| mine.contains(r)) {
            peers.push(other.index);
        }
    }
    peers.sort_unstable();
    peers.dedup();
    peers
}

/// One group in label form: runs of three or more consecutive indices as `a-b`, the
/// rest comma-separated (`0-3`, `0,2`, `0-2,5`).
fn group_text(group: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < group.len() {
        let mut j = i;
        while j + 1 < group.len() && group[j + 1] == group[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            parts.push(format!("{}-{}", group[i], group[j]));
        } else {
            parts.extend(group[i..=j].iter().map(u32::to_string));
        }
        i = j + 1;
    }
    parts.join(",")
}

/// The `gantry.io/gpu-groups` value for `groups`, or `None` when no group has two
/// GPUs (no NVLink at all: the label would say nothing).
pub fn groups_label(groups: &[Vec<u32>]) -> Option<String> {
    if groups.iter().all(|g| g.len() < 2) {
        return None;
    }
    Some(
        groups
            .iter()
            .map(|g| group_text(g))
            .collect::<Vec<_>>()
            .join("|"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::inventory::NvLinkInfo;

    /// GPUs 0..n with bus ids `0000:0<i>:00.0` and links to the given remote ends.
    fn boxed(links: &[&[&str]]) -> Vec<GpuInfo> {
        let mut gpus: Vec<GpuInfo> = links
            .iter()
            .enumerate()
            .map(|(i, remotes)| {
                let mut g = GpuInfo::configured(i as u32, "H100", 81_920);
                g.pci_bus_id = Some(format!("00000000:{:02X}:00.0", i + 0x10));
                g.nvlinks = remotes
                    .iter()
                    .enumerate()
                    .map(|(l, r)| NvLinkInfo {
                        link: l as u32,
                        remote_pci_bus_id: (*r).to_string(),
                        peer_index: None,
                    })
                    .collect();
                g
            })
            .collect();
        resolve_peers(&mut gpus);
        gpus
    }

    /// The bus id of GPU `i` in `boxed`, in the short form the driver may also use.
    fn bus(i: u32) -> String {
        format!("0000:{:02x}:00.0", i + 0x10)
    }

    #[test]
    fn bus_ids_compare_across_spellings() {
        assert_eq!(normalize_bus_id("00000000:07:00.0"), "0000:07:00.0");
        assert_eq!(normalize_bus_id(" 0000:0A:00.0 "), "0000:0a:00.0");
        assert_eq!(normalize_bus_id("not-a-bus"), "not-a-bus");
    }

    #[test]
    fn a_fully_linked_eight_gpu_box_is_one_group() {
        let all: Vec<String> = (0..8).map(bus).collect();
        let links: Vec<Vec<&str>> = (0..8)
            .map(|i| {
                all.iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, b)| b.as_str())
                    .collect()
            })
            .collect();
        let refs: Vec<&[&str]> = links.iter().map(Vec::as_slice).collect();
        let gpus = boxed(&refs);
        assert_eq!(gpus[0].nvlinks[0].peer_index, Some(1));
        let groups = nvlink_groups(&gpus);
        assert_eq!(groups, vec![(0..8).collect::<Vec<u32>>()]);
        assert_eq!(groups_label(&groups).as_deref(), Some("0-7"));
        assert_eq!(nvlink_peers(&gpus, &gpus[3]), vec![0, 1, 2, 4, 5, 6, 7]);
    }

    #[test]
    fn two_four_gpu_islands_are_two_groups() {
        // A ring inside each island: 0-1-2-3-0 and 4-5-6-7-4.
        let b: Vec<String> = (0..8).map(bus).collect();
        let ring = |i: usize, base: usize| {
            let next = base + (i - base + 1) % 4;
            let prev = base + (i - base + 3) % 4;
            vec![b[next].as_str(), b[prev].as_str()]
        };
        let links: Vec<Vec<&str>> = (0..8).map(|i| ring(i, i / 4 * 4)).collect();
        let refs: Vec<&[&str]> = links.iter().map(Vec::as_slice).collect();
        let groups = nvlink_groups(&boxed(&refs));
        assert_eq!(groups, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(groups_label(&groups).as_deref(), Some("0-3|4-7"));
    }

    #[test]
    fn gpus_behind_the_same_switches_are_one_group() {
        // HGX-style: every GPU links only to NVSwitches (bus ids no GPU has).
        let switches = ["0000:c1:00.0", "0000:c2:00.0"];
        let links: Vec<&[&str]> = (0..4).map(|_| &switches[..]).collect();
        let gpus = boxed(&links);
        assert!(gpus[0].nvlinks.iter().all(|l| l.peer_index.is_none()));
        assert_eq!(nvlink_groups(&gpus), vec![vec![0, 1, 2, 3]]);
        assert_eq!(nvlink_peers(&gpus, &gpus[2]), vec![0, 1, 3]);
    }

    #[test]
    fn unlinked_gpus_give_no_label_and_odd_shapes_keep_their_members() {
        let gpus = boxed(&[&[], &[], &[]]);
        let groups = nvlink_groups(&gpus);
        assert_eq!(groups, vec![vec![0], vec![1], vec![2]]);
        assert_eq!(groups_label(&groups), None);
        // Pairs 0-2 and 1-3 plus a lone GPU 4.
        let (b0, b1, b2, b3) = (bus(0), bus(1), bus(2), bus(3));
        let gpus = boxed(&[&[&b2], &[&b3], &[&b0], &[&b1], &[]]);
        let groups = nvlink_groups(&gpus);
        assert_eq!(groups, vec![vec![0, 2], vec![1, 3], vec![4]]);
        assert_eq!(groups_label(&groups).as_deref(), Some("0,2|1,3|4"));
        assert_eq!(group_text(&[0, 1, 2, 5, 7, 8]), "0-2,5,7,8");
    }

    #[test]
    fn the_backfill_plugin_reads_the_label_as_the_same_groups() {
        let cases: [&[Vec<u32>]; 3] = [
            &[vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
            &[vec![0, 2], vec![1, 3], vec![4]],
            &[vec![0, 1, 2, 5, 7, 8], vec![3, 4, 6]],
        ];
        for groups in cases {
            let label = groups_label(groups).unwrap();
            let mut indices: Vec<u32> = groups.iter().flatten().copied().collect();
            indices.sort_unstable();
            // The plugin answers slot offsets; with sorted indices offset = position.
            let parsed = gantry_plugin_backfill::topology::parse_groups(&label, &indices);
            let as_indices: Vec<Vec<u32>> = parsed
                .iter()
                .map(|g| g.iter().map(|&o| indices[o]).collect())
                .collect();
            assert_eq!(as_indices, groups, "label {label}");
        }
        assert_eq!(GPU_GROUPS_LABEL, gantry_plugin_backfill::GPU_GROUPS_LABEL);
    }
}
