//! Command lines read as SLURM's commands read them (getopt_long): `--name=value`,
//! `--name value`, a unique prefix of a long name, `-X value`, `-Xvalue`, bundled flags
//! (`-hr`), options and operands in any order unless the command stops at its first operand
//! (`srun CMD ARGS`), and `--` ending the options. An option the command does not have is
//! an error naming it, as SLURM's.
//!
//! Owns: that grammar. Does not own what any option means (each command's module).

use anyhow::{Result, bail};

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Takes {
    /// A flag.
    Nothing,
    /// A value, after `=` or as the next word.
    Value,
    /// A value only after `=` (`--exclusive[=user]`).
    Optional,
}

/// One option of a command: long name, short letter, what it takes.
pub(super) type Opt = (&'static str, Option<char>, Takes);

/// A command line, read.
#[derive(Debug, Default)]
pub(super) struct Line {
    /// The options in order, by long name, with their values.
    pub opts: Vec<(&'static str, Option<String>)>,
    /// The operands (with `stop_at_operand`, the first operand and every word after it).
    pub operands: Vec<String>,
}

impl Line {
    /// Whether option `long` was given.
    pub fn has(&self, long: &str) -> bool {
        self.opts.iter().any(|(n, _)| *n == long)
    }

    /// The last value given to `long`.
    pub fn value(&self, long: &str) -> Option<&str> {
        self.opts
            .iter()
            .rev()
            .find(|(n, _)| *n == long)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Every value given to `long`, each split at commas (`-j 1,2 -j 3`).
    pub fn list(&self, long: &str) -> Vec<String> {
        self.opts
            .iter()
            .filter(|(n, _)| *n == long)
            .filter_map(|(_, v)| v.as_deref())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// Reads `args` against `table`; with `stop_at_operand`, the first operand and everything
/// after it are operands (a command and its arguments).
pub(super) fn parse(table: &[Opt], args: &[String], stop_at_operand: bool) -> Result<Line> {
    let mut line = Line::default();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            line.operands.extend(words.cloned());
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let (full, takes) = find_long(table, name)?;
            let value = match (takes, inline) {
                (Takes::Nothing, Some(_)) => bail!("option '--{full}' doesn't allow an argument"),
                (Takes::Value, None) => match words.next() {
                    Some(v) => Some(v.clone()),
                    None => bail!("option '--{full}' requires an argument"),
                },
                (_, v) => v,
            };
            line.opts.push((full, value));
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (i, c) in shorts.char_indices() {
                let Some((full, _, takes)) = table.iter().find(|(_, s, _)| *s == Some(c)) else {
                    bail!("invalid option -- '{c}'");
                };
                if *takes == Takes::Nothing {
                    line.opts.push((full, None));
                    continue;
                }
                let rest = &shorts[i + c.len_utf8()..];
                let value = if !rest.is_empty() {
                    Some(rest.strip_prefix('=').unwrap_or(rest).to_string())
                } else if *takes == Takes::Value {
                    match words.next() {
                        Some(v) => Some(v.clone()),
                        None => bail!("option requires an argument -- '{c}'"),
                    }
                } else {
                    None
                };
                line.opts.push((full, value));
                break;
            }
        } else if stop_at_operand {
            line.operands.push(word.clone());
            line.operands.extend(words.cloned());
            break;
        } else {
            line.operands.push(word.clone());
        }
    }
    Ok(line)
}

/// The option `name` names: exactly, or as the unique prefix of one long name.
fn find_long(table: &[Opt], name: &str) -> Result<(&'static str, Takes)> {
    if let Some((l, _, t)) = table.iter().find(|(l, _, _)| *l == name) {
        return Ok((l, *t));
    }
    let prefixed: Vec<&Opt> = table
        .iter()
        .filter(|(l, _, _)| !name.is_empty() && l.starts_with(name))
        .collect();
    match prefixed.as_slice() {
        [(l, _, t)] => Ok((l, *t)),
        [] => bail!("unrecognized option '--{name}'"),
        many => {
            let names: Vec<String> = many.iter().map(|(l, _, _)| format!("'--{l}'")).collect();
            bail!(
                "option '--{name}' is ambiguous; possibilities: {}",
                names.join(" ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Opt] = &[
        ("noheader", Some('h'), Takes::Nothing),
        ("jobs", Some('j'), Takes::Value),
        ("format", Some('o'), Takes::Value),
        ("exclusive", None, Takes::Optional),
        ("array", Some('r'), Takes::Nothing),
    ];

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn reads_getopt_forms_in_any_order() {
        let l = parse(
            TABLE,
            &words("-hr -j 4,5 x --form=%i -j6 --exclusive y"),
            false,
        )
        .unwrap();
        assert!(l.has("noheader") && l.has("array") && l.has("exclusive"));
        assert_eq!(l.list("jobs"), ["4", "5", "6"]);
        assert_eq!(l.value("format"), Some("%i"));
        assert_eq!(l.operands, ["x", "y"]);
    }

    #[test]
    fn stops_at_the_command_when_asked() {
        let l = parse(TABLE, &words("-h python -j 3"), true).unwrap();
        assert_eq!(l.operands, ["python", "-j", "3"]);
    }

    #[test]
    fn unknown_ambiguous_and_missing_values_are_errors() {
        for bad in ["--frob", "-z", "-j", "--jobs", "--noheader=1"] {
            assert!(parse(TABLE, &words(bad), false).is_err(), "{bad}");
        }
        let e = parse(
            &[
                ("alpha", None, Takes::Nothing),
                ("also", None, Takes::Nothing),
            ],
            &words("--al"),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("ambiguous"), "{e}");
    }
}
