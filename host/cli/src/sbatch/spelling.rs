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
    "overcommit",
    "power",
    "priority",
    "profile",
    "propagate",
    "reboot",
    "sockets-per-node",
    "spread-job",
    "switches",
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
    "x11",
];

/// The sbatch options of [`SBATCH_ONLY`] that take no value (or an optional one, given only
/// after `=`).
const SBATCH_ONLY_FLAGS: &[&str] = &[
    "contiguous",
    "get-user-env",
    "ignore-pbs",
    "no-kill",
    "overcommit",
    "reboot",
    "spread-job",
    "usage",
    "use-min-nodes",
    "verbose",
    "version",
    "wait",
    "x11",
];

/// sbatch's short options that Gantry does not list as its own: `-k` (no-kill), `-O`
/// (overcommit), `-v`, `-V`, `-W` (wait) and those taking a value (`-B`, `-F`, `-m`, `-M`,
/// `-S`).
const SBATCH_ONLY_SHORT: &[(char, bool)] = &[
    ('k', false),
    ('O', false),
    ('v', false),
    ('V', false),
    ('W', false),
    ('B', true),
    ('F', true),
    ('m', true),
    ('M', true),
    ('S', true),
];

/// The sbatch option (SLURM 22.05) that Gantry does not apply which `name` names, exactly
/// or as the unique prefix SLURM accepts, and whether it takes a value.
pub(crate) fn sbatch_only(name: &str) -> Option<(&'static str, bool)> {
    let takes_value = |n: &str| !SBATCH_ONLY_FLAGS.contains(&n);
    if let Some(n) = SBATCH_ONLY.iter().find(|n| **n == name) {
        return Some((n, takes_value(n)));
    }
    let mut prefixed = SBATCH_ONLY.iter().filter(|n| n.starts_with(name));
    match (prefixed.next(), prefixed.next()) {
        (Some(n), None) if !name.is_empty() => Some((n, takes_value(n))),
        _ => None,
    }
}

/// Whether short option `-letter` is an sbatch option Gantry does not apply, and whether
/// it takes a value.
pub(crate) fn sbatch_only_short(letter: &str) -> Option<bool> {
    SBATCH_ONLY_SHORT
        .iter()
        .find(|(c, _)| letter.chars().eq(std::iter::once(*c)))
        .map(|(_, v)| *v)
}

/// The sbatch option nearest to `name`, Gantry's or not, when it is close enough to be
/// what was meant (within a third of its length, at least two edits).
pub(crate) fn closest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.len() / 3).max(2);
    known
        .chain(SBATCH_ONLY.iter().copied())
        .map(|k| (distance(name, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

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
