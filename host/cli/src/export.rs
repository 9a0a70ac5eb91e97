//! Which of the submitting shell's variables a job gets, as sbatch's `--export`: `ALL` (the
//! default), `NONE`, or a comma-separated list of names and `NAME=value` pairs, optionally
//! with `ALL` in it. The CLI's own settings (`GANTRY_*`: the server, the token, the CA) are
//! never sent, even when listed, nor are names the API would refuse or the shell's bookkeeping (`_`, `PWD`,
//! `OLDPWD`, `SHLVL`). At most [`MAX_EXPORTED`] variables (the API's bound), by name order.
//!
//! Owns the rule. It does not send anything (`submit_cli`).

use anyhow::bail;
use serde_json::{Map, Value};
use std::ffi::OsString;

/// The most variables a job spec may carry (`JobSpec::validate`), `--env` ones included.
pub const MAX_EXPORTED: usize = 224;

/// Whether `name` is a variable a job may be given from the shell.
fn exportable(name: &str) -> bool {
    let mut chars = name.chars();
    let portable = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    portable && !name.starts_with("GANTRY_") && !matches!(name, "_" | "PWD" | "OLDPWD" | "SHLVL")
}

/// The variables `export` selects from `vars` (the process environment).
pub fn exported(
    export: &str,
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> anyhow::Result<Map<String, Value>> {
    let shell: Vec<(String, String)> = vars
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| exportable(k))
        .collect();
    let mut out = Map::new();
    let spec = export.trim();
    if spec.eq_ignore_ascii_case("NONE") {
        return Ok(out);
    }
    let items: Vec<&str> = spec
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect();
    if items.is_empty() {
        bail!("--export: give ALL, NONE or a list of variables (PATH,HOME,LR=0.1)");
    }
    if items.iter().any(|i| i.eq_ignore_ascii_case("ALL")) {
        let mut all = shell.clone();
        all.sort();
        for (k, v) in all.into_iter().take(MAX_EXPORTED) {
            out.insert(k, Value::String(v));
        }
    }
    for item in items.iter().filter(|i| !i.eq_ignore_ascii_case("ALL")) {
        // Named or not, the CLI's own settings stay here (a tool such as batchspawner lists
        // every variable it has); the job gets its own `GANTRY_*` from the daemon.
        if item
            .split('=')
            .next()
            .is_some_and(|k| k.starts_with("GANTRY_"))
        {
            continue;
        }
        match item.split_once('=') {
            Some((k, v)) if exportable(k) => {
                out.insert(k.to_owned(), Value::String(v.to_owned()));
            }
            None if exportable(item) => {
                if let Some((_, v)) = shell.iter().find(|(k, _)| k == item) {
                    out.insert((*item).to_owned(), Value::String(v.clone()));
                }
            }
            _ => bail!("--export: {item:?} is not a variable a job may be given"),
        }
    }
    Ok(out)
}

/// Variables that describe the submitting account, not the job's.
const IDENTITY: [&str; 6] = ["PATH", "HOME", "USER", "LOGNAME", "MAIL", "SHELL"];

/// Root submitting for another account (`user`): root's `PATH`, home and names are not sent,
/// so the job starts from its own account's (and the system's default `PATH`).
pub fn drop_roots_identity(env: &mut Map<String, Value>, user: &str, submitter_uid: u32) {
    if submitter_uid == 0 && !user.is_empty() && user != "root" {
        for name in IDENTITY {
            env.remove(name);
        }
    }
}

/// The name of the account this process runs as (for `--me`, and `sacct`'s default).
pub fn current_user() -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .ok()
        .and_then(|m| gantry_node::sys::account_name(m.uid()))
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_default()
}

/// The uid this process runs as.
pub fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> impl Iterator<Item = (OsString, OsString)> {
        [
            ("PATH", "/opt/conda/bin:/usr/bin"),
            ("HOME", "/home/alice"),
            ("GANTRY_TOKEN", "secret"),
            ("_", "/usr/bin/gantry"),
            ("BASH_FUNC_f%%", "() { :; }"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
    }

    #[test]
    fn all_none_and_lists_as_sbatch_means_them_without_the_token() {
        let all = exported("ALL", vars()).unwrap();
        let names: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(names, ["HOME", "PATH"]);
        assert!(exported("NONE", vars()).unwrap().is_empty());
        let some = exported("PATH,LR=0.1,MISSING", vars()).unwrap();
        assert_eq!(some.len(), 2);
        assert_eq!(some["LR"], "0.1");
        let more = exported("ALL,LR=0.1", vars()).unwrap();
        assert_eq!(more.len(), 3);
        let named = exported("GANTRY_TOKEN,PATH,GANTRY_SERVER=x", vars()).unwrap();
        assert_eq!(named.keys().collect::<Vec<_>>(), ["PATH"]);
        assert!(exported("A-B", vars()).is_err());
        // Root submitting for alice sends neither its PATH nor its home.
        let mut roots = exported("ALL", vars()).unwrap();
        drop_roots_identity(&mut roots, "alice", 0);
        assert!(roots.is_empty(), "{roots:?}");
        let mut alices = exported("ALL", vars()).unwrap();
        drop_roots_identity(&mut alices, "alice", 1000);
        assert_eq!(alices.len(), 2);
        assert!(exported("", vars()).is_err());
    }
}
