//! What a task starts from on disk, the same on the controller's node and on agents: its
//! command (the job's argv, or its script written into the task's directory: run directly
//! when it starts with `#!`, else with `/bin/sh`), and its working directory (the job's own,
//! else the task's directory, or `<dir>/work` owned by the user a task runs as, so that the
//! directory the daemon writes logs and exit records into stays the daemon's and a task
//! cannot plant links there).
//!
//! Owns: these two rules. Does not own where the directory is (the caller's) or launching.

use super::TaskIdentity;
use std::io;
use std::path::{Path, PathBuf};

/// argv of a task: `argv`, or `script` written to `<dir>/script` (`dir` is created).
pub fn command(dir: &Path, argv: &[String], script: Option<&str>) -> io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let Some(script) = script else {
        return Ok(argv.to_vec());
    };
    let path = dir.join("script");
    std::fs::write(&path, script)?;
    let path = path.to_string_lossy().into_owned();
    Ok(if script.starts_with("#!") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        vec![path]
    } else {
        vec!["/bin/sh".into(), path]
    })
}

/// The working directory: `own` (the job's); else `dir`, or, for a task that runs as
/// another user, `<dir>/work` owned by that user.
pub fn workdir(
    own: Option<&str>,
    dir: &Path,
    identity: Option<&TaskIdentity>,
) -> io::Result<PathBuf> {
    if let Some(own) = own {
        return Ok(PathBuf::from(own));
    }
    let Some(who) = identity else {
        return Ok(dir.to_path_buf());
    };
    let work = dir.join("work");
    std::fs::create_dir_all(&work)?;
    // lchown: never follow a link planted by an earlier run.
    std::os::unix::fs::lchown(&work, Some(who.uid), Some(who.gid))?;
    Ok(work)
}
