//! `gantry slurm-links DIR`: makes `DIR/sbatch`, `DIR/squeue`, ... links to this binary, so
//! that SLURM's command names run Gantry. Nothing is put over a file that is there already
//! (a real SLURM's `sbatch`, or anything else): that name is refused and the rest are made.
//! A link that already points to this binary is left as it is.
//!
//! Owns: making the links. Does not own what the names do (`slurm`).

use super::COMMANDS;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// What became of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The link was made.
    Made(PathBuf),
    /// It was already a link to this binary.
    Present(PathBuf),
    /// Something else is there; left alone.
    Refused(PathBuf, String),
}

/// Makes the links in `dir` to `target` (this binary); one outcome per command name.
pub fn make(dir: &Path, target: &Path) -> Result<Vec<Outcome>> {
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let target = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    let mut out = Vec::new();
    for (name, _) in COMMANDS {
        let link = dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(_) => {
                let ours = std::fs::read_link(&link)
                    .ok()
                    .and_then(|t| dir.join(t).canonicalize().ok())
                    .is_some_and(|t| t == target);
                out.push(if ours {
                    Outcome::Present(link)
                } else {
                    Outcome::Refused(
                        link,
                        "something is there already (a SLURM installation?): left alone".into(),
                    )
                });
            }
            Err(_) => {
                std::os::unix::fs::symlink(&target, &link)
                    .with_context(|| format!("cannot make {}", link.display()))?;
                out.push(Outcome::Made(link));
            }
        }
    }
    Ok(out)
}

/// `gantry slurm-links DIR`: makes the links and says what it did; fails when a name was
/// refused, after making the others.
pub fn run(dir: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find this binary")?;
    let outcomes = make(dir, &exe)?;
    let mut refused = 0;
    for o in &outcomes {
        match o {
            Outcome::Made(l) => println!("made {} -> {}", l.display(), exe.display()),
            Outcome::Present(l) => println!("kept {} (already Gantry)", l.display()),
            Outcome::Refused(l, why) => {
                refused += 1;
                eprintln!("refused {}: {why}", l.display());
            }
        }
    }
    println!(
        "Put {} first on PATH to use these names (see docs/user/slurm-clients.md).",
        dir.display()
    );
    if refused > 0 {
        bail!("{refused} names were left alone: choose an empty directory for the links");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_every_name_and_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("gantry-bin");
        std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
        std::fs::write(dir.path().join("sbatch"), b"real slurm").unwrap();
        let out = make(dir.path(), &bin).unwrap();
        assert_eq!(out.len(), COMMANDS.len());
        assert!(matches!(&out[0], Outcome::Refused(..)), "{out:?}");
        assert_eq!(
            std::fs::read(dir.path().join("sbatch")).unwrap(),
            b"real slurm"
        );
        assert!(
            out[1..].iter().all(|o| matches!(o, Outcome::Made(_))),
            "{out:?}"
        );
        // Again: the links are ours and kept.
        let again = make(dir.path(), &bin).unwrap();
        assert!(
            again[1..].iter().all(|o| matches!(o, Outcome::Present(_))),
            "{again:?}"
        );
    }
}
