//! Telling a misspelt `#SBATCH` option from a real SLURM option Gantry does not support: an
//! unknown name within two edits of an option Gantry knows (`--gress`, `--cpu-per-task`) is
//! refused with the nearest spelling, unless it is itself an sbatch option (`--tmp` is one,
//! two edits from `--time`), which is only reported as not supported.
//!
//! Owns the distance and the list of sbatch options Gantry reads but does not apply. It does
//! not parse directives (`sbatch.rs`).

/// sbatch options (SLURM 22.05) that Gantry does not list as its own: not misspellings.
const SBATCH_ONLY: &[&str] = &[
    "acctg-freq",
    "batch",
    "bb",
    "bbf",
    "cluster-constraint",
    "clusters",
    "container",
    "container-image",
    "container-mounts",
    "contiguous",
    "core-spec",
    "cores-per-socket",
    "cpu-freq",
    "cpu-bind",
    "cpus-per-socket",
    "deadline",
    "delay-boot",
    "distribution",
    "exclusive-user",
    "extra-node-info",
    "get-user-env",
    "gid",
    "gpu-bind",
    "gpu-freq",
    "gres-flags",
    "hint",
    "ignore-pbs",
    "kill-on-invalid-dep",
    "mcs-label",
    "mem-bind",
    "mincpus",
    "network",
    "nice",
    "no-kill",
    "no-requeue",
    "ntasks-per-core",
    "ntasks-per-gpu",
    "ntasks-per-socket",
    "open-mode",
    "overcommit",
    "parsable",
    "power",
    "priority",
    "profile",
    "propagate",
    "quiet",
    "reboot",
    "sockets-per-node",
    "spread-job",
    "switches",
    "test-only",
    "thread-spec",
    "threads-per-core",
    "tmp",
    "uid",
    "usage",
    "use-min-nodes",
    "verbose",
    "version",
    "wait",
    "wait-all-nodes",
    "wckey",
    "wrap",
    "x11",
];

/// The known option `name` is most likely a misspelling of, if any: within two edits, of
/// at least 4 letters, and not an sbatch option of its own.
pub(crate) fn nearest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    if name.len() < 4 || SBATCH_ONLY.contains(&name) {
        return None;
    }
    known
        .map(|k| (distance(name, k), k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance (insertions, deletions, substitutions) between two short names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspellings_are_caught_and_real_sbatch_options_are_not() {
        let known = ["time", "gres", "cpus-per-task", "mem"];
        assert_eq!(nearest("gress", known.into_iter()), Some("gres"));
        assert_eq!(
            nearest("cpu-per-task", known.into_iter()),
            Some("cpus-per-task")
        );
        assert_eq!(nearest("tmp", known.into_iter()), None);
        assert_eq!(nearest("wckey", known.into_iter()), None);
        assert_eq!(nearest("mem-bind", known.into_iter()), None);
        assert_eq!(nearest("frobnicate", known.into_iter()), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
