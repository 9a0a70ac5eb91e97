//! SLURM's hostlist notation: `node[01-04,07],gpu3` for the names `node01`..`node04`,
//! `node07` and `gpu3`. [`compress`] writes a list of names that way (what
//! `SLURM_JOB_NODELIST` and `squeue`'s `%N` show), [`expand`] reads it back (`scontrol show
//! hostnames`, and the tools that parse `SLURM_JOB_NODELIST`).
//!
//! Owns the notation only. Pure: no I/O.

/// At most this many names come out of one [`expand`] (a hostile `n[0-999999999]`).
pub const MAX_EXPANDED: usize = 100_000;

/// A name split into its text prefix and its trailing number (with its width, for zero
/// padding): `node07` → (`node`, 7, 2).
fn split_number(name: &str) -> Option<(&str, u64, usize)> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 18 {
        return None;
    }
    let (prefix, number) = name.split_at(name.len() - digits);
    Some((prefix, number.parse().ok()?, digits))
}

/// `names` in hostlist notation, in the order given: consecutive names with one prefix and
/// one number width are folded into ranges (`node[1-3]`); other names stay as they are.
pub fn compress(names: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < names.len() {
        let Some((prefix, first, width)) = split_number(&names[i]) else {
            out.push(names[i].clone());
            i += 1;
            continue;
        };
        // The names that share this prefix and width, as far as they follow each other.
        let mut numbers = vec![first];
        let mut j = i + 1;
        while let Some((p, n, w)) = names.get(j).and_then(|n| split_number(n)) {
            if p != prefix || w != width {
                break;
            }
            numbers.push(n);
            j += 1;
        }
        if numbers.len() == 1 {
            out.push(names[i].clone());
        } else {
            out.push(format!("{prefix}[{}]", ranges(&numbers, width)));
        }
        i = j;
    }
    out.join(",")
}

/// `1-3,7` for numbers in the order given, each written `width` digits wide.
fn ranges(numbers: &[u64], width: usize) -> String {
    let mut parts = Vec::new();
    let mut k = 0;
    while k < numbers.len() {
        let start = numbers[k];
        while k + 1 < numbers.len() && numbers[k + 1] == numbers[k] + 1 {
            k += 1;
        }
        let end = numbers[k];
        parts.push(if start == end {
            format!("{start:0width$}")
        } else {
            format!("{start:0width$}-{end:0width$}")
        });
        k += 1;
    }
    parts.join(",")
}

/// The names a hostlist stands for, in order: `node[01-03],gpu1` → `node01 node02 node03
/// gpu1`. Errors name what is malformed; more than [`MAX_EXPANDED`] names is an error.
pub fn expand(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in split_top(list)? {
        let Some(open) = item.find('[') else {
            if !item.is_empty() {
                out.push(item.to_string());
            }
            continue;
        };
        let close = item
            .rfind(']')
            .filter(|c| *c > open)
            .ok_or_else(|| format!("{item:?}: a [ without its ]"))?;
        let (prefix, inner, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
        for part in inner.split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let width = a.len();
            let parse = |s: &str| {
                s.parse::<u64>()
                    .map_err(|_| format!("{item:?}: {part:?} is not a number or a range"))
            };
            let (first, last) = (parse(a)?, parse(b)?);
            if first > last || (last - first) as usize >= MAX_EXPANDED - out.len().min(MAX_EXPANDED)
            {
                return Err(format!("{item:?}: {part:?} is backwards or too long"));
            }
            out.extend((first..=last).map(|n| format!("{prefix}{n:0width$}{suffix}")));
        }
    }
    if out.len() > MAX_EXPANDED {
        return Err(format!("more than {MAX_EXPANDED} names"));
    }
    Ok(out)
}

/// The comma-separated items of a hostlist, not splitting inside brackets.
fn split_top(list: &str) -> Result<Vec<&str>, String> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0u32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1).ok_or("a ] without its [")?,
            ',' if depth == 0 => {
                items.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(list[start..].trim());
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn consecutive_names_fold_into_ranges() {
        let n = names(&["node01", "node02", "node03", "node04", "node07", "gpu3"]);
        assert_eq!(compress(&n), "node[01-04,07],gpu3");
        assert_eq!(compress(&names(&["localhost"])), "localhost");
        assert_eq!(compress(&names(&["n1", "n2", "m1"])), "n[1-2],m1");
        assert_eq!(compress(&[]), "");
    }

    #[test]
    fn expand_reads_what_compress_writes() {
        let n = names(&["node01", "node02", "node03", "node07", "gpu3", "login"]);
        assert_eq!(expand(&compress(&n)).unwrap(), n);
        assert_eq!(expand("a[8-10]").unwrap(), names(&["a8", "a9", "a10"]));
        assert_eq!(
            expand("rack[1-2]-gpu").unwrap(),
            names(&["rack1-gpu", "rack2-gpu"])
        );
    }

    #[test]
    fn malformed_and_huge_lists_are_refused() {
        assert!(expand("n[1-3").is_err());
        assert!(expand("n]1[").is_err());
        assert!(expand("n[3-1]").is_err());
        assert!(expand("n[x]").is_err());
        assert!(expand("n[0-999999999]").is_err());
    }
}
