//! The user a task runs as (README "Isolation", `docs/security.md`): when the daemon runs as root and
//! `execution.run_as_user` is on, a task runs with the uid, gid and supplementary groups of its
//! job's user, looked up by name in the node's user database, else the account
//! `execution.user_map` gives it (a user with neither is refused: two users never share a
//! uid); an anonymous job (no identity) runs as `execution.fallback_user`; root only with
//! `execution.allow_root`.
//!
//! Owns the look-up (`getpwnam_r`, `getgrouplist`) and the rules. It does not switch identity:
//! the shim does, in its child, just before `exec` (`child.rs`).

use std::ffi::{CStr, CString};

use crate::config_execution::ExecutionConfig;

/// Who a task runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskIdentity {
    /// The account's name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary group ids (the primary group included, as `getgrouplist` gives them).
    pub groups: Vec<u32>,
    /// Home directory (for `HOME`).
    pub home: String,
}

/// Why a job cannot run as its user.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    /// The user resolves to uid 0 and `execution.allow_root` is off.
    #[error("jobs may not run as root (execution.allow_root)")]
    Root,
    /// The user has no account here and `execution.user_map` gives it none.
    #[error(
        "user {0:?} has no account on this node: add one, or map the user to an account of its own in execution.user_map (users never share the fallback account)"
    )]
    NoAccount(String),
    /// `execution.user_map` names an account that does not exist.
    #[error(
        "execution.user_map maps user {user:?} to {account:?}, which has no account on this node"
    )]
    NoMappedAccount {
        /// The job's user.
        user: String,
        /// The account it is mapped to.
        account: String,
    },
    /// The fallback account does not exist either.
    #[error("user {user:?} has no account on this node, nor has the fallback user {fallback:?}")]
    NoFallback {
        /// The job's user.
        user: String,
        /// `execution.fallback_user`.
        fallback: String,
    },
    /// A job submitted without an identity, and no fallback account to run it as.
    #[error(
        "job of user {0:?} was submitted without an identity (no API token, not over the Unix socket) and execution.fallback_user is empty: it may not run as the user it names"
    )]
    Anonymous(String),
    /// The user database could not be read.
    #[error("cannot look up user {user:?}: {error}")]
    Lookup {
        /// The user looked up.
        user: String,
        /// What went wrong.
        error: String,
    },
}

/// Whether tasks change identity at all: the daemon runs as root and `run_as_user` is on.
pub(crate) fn switching(config: &ExecutionConfig) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    config.run_as_user && unsafe { libc::geteuid() } == 0
}

/// The identity a task of `user` runs as under `config`; `None` when tasks keep the daemon's.
/// `anonymous`: the submitter's identity was not established, so `user` is only a claim:
/// the task runs as the fallback account (a claim of root is refused as root is).
pub(crate) fn resolve(
    config: &ExecutionConfig,
    user: &str,
    anonymous: bool,
) -> Result<Option<TaskIdentity>, IdentityError> {
    if !switching(config) {
        return Ok(None);
    }
    if anonymous {
        let claims_root = lookup(user)?.is_some_and(|found| found.uid == 0);
        if claims_root && !config.allow_root {
            return Err(IdentityError::Root);
        }
        if config.fallback_user.is_empty() {
            return Err(IdentityError::Anonymous(user.to_owned()));
        }
        let found = lookup(&config.fallback_user)?.ok_or_else(|| IdentityError::NoFallback {
            user: user.to_owned(),
            fallback: config.fallback_user.clone(),
        })?;
        if found.uid == 0 && !config.allow_root {
            return Err(IdentityError::Root);
        }
        return Ok(Some(found));
    }
    let found = match (lookup(user)?, config.user_map.get(user)) {
        (Some(found), _) => found,
        (None, Some(account)) => {
            lookup(account)?.ok_or_else(|| IdentityError::NoMappedAccount {
                user: user.to_owned(),
                account: account.clone(),
            })?
        }
        (None, None) => return Err(IdentityError::NoAccount(user.to_owned())),
    };
    if found.uid == 0 && !config.allow_root {
        return Err(IdentityError::Root);
    }
    Ok(Some(found))
}

/// The account named `name`, with its groups; `None` if there is none.
pub(crate) fn lookup(name: &str) -> Result<Option<TaskIdentity>, IdentityError> {
    let err = |error: String| IdentityError::Lookup {
        user: name.to_owned(),
        error,
    };
    let Ok(c_name) = CString::new(name) else {
        return Ok(None);
    };
    if name.is_empty() {
        return Ok(None);
    }
    let mut buf = vec![0 as libc::c_char; 4096];
    loop {
        // SAFETY: all-zero is a valid `passwd` (null pointers, zero ids).
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `buf` is writable for `buf.len()` bytes;
        // on success the strings in `pwd` point into `buf`, which outlives their use below.
        let rc = unsafe {
            libc::getpwnam_r(
                c_name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 {
            return Err(err(std::io::Error::from_raw_os_error(rc).to_string()));
        }
        if result.is_null() {
            return Ok(None);
        }
        let home = if pwd.pw_dir.is_null() {
            "/".to_owned()
        } else {
            // SAFETY: on success pw_dir is a NUL-terminated string inside `buf`.
            unsafe { CStr::from_ptr(pwd.pw_dir) }
                .to_string_lossy()
                .into_owned()
        };
        let groups = group_list(&c_name, pwd.pw_gid).map_err(err)?;
        return Ok(Some(TaskIdentity {
            name: name.to_owned(),
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
            groups,
            home,
        }));
    }
}

/// The groups of `name` whose primary group is `gid` (`getgrouplist`).
fn group_list(name: &CStr, gid: u32) -> Result<Vec<u32>, String> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    for _ in 0..8 {
        let mut count = groups.len() as libc::c_int;
        // SAFETY: `groups` is writable for `count` entries; `name` is NUL-terminated.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        let count = usize::try_from(count).unwrap_or(0);
        if rc >= 0 {
            groups.truncate(count);
            return Ok(groups);
        }
        // Too small: `count` now holds the number needed.
        groups.resize(count.max(groups.len() * 2), 0);
    }
    Err("getgrouplist kept asking for a larger buffer".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(run_as_user: bool, fallback: &str, allow_root: bool) -> ExecutionConfig {
        ExecutionConfig {
            run_as_user,
            fallback_user: fallback.into(),
            allow_root,
            ..ExecutionConfig::default()
        }
    }

    fn am_root() -> bool {
        // SAFETY: no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn lookup_finds_root_and_nobody_and_not_strangers() {
        let root = lookup("root").unwrap().unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        let nobody = lookup("nobody").unwrap().unwrap();
        assert_eq!(nobody.uid, 65534);
        assert_eq!(lookup("gantry-no-such-user-xyz").unwrap(), None);
        assert_eq!(lookup("").unwrap(), None);
        assert_eq!(lookup("a\0b").unwrap(), None);
    }

    #[test]
    fn rules_for_root_fallback_and_off() {
        assert!(am_root(), "identity switching needs root (CI runs as root)");
        let on = config(true, "nobody", false);
        assert_eq!(resolve(&on, "root", false), Err(IdentityError::Root));
        assert_eq!(
            IdentityError::Root.to_string(),
            "jobs may not run as root (execution.allow_root)"
        );
        // A user without an account is refused, never run as the fallback account.
        assert_eq!(
            resolve(&on, "gantry-no-such-user-xyz", false),
            Err(IdentityError::NoAccount("gantry-no-such-user-xyz".into()))
        );
        assert_eq!(resolve(&on, "nobody", false).unwrap().unwrap().uid, 65534);
        let root_ok = config(true, "nobody", true);
        assert_eq!(resolve(&root_ok, "root", false).unwrap().unwrap().uid, 0);
        // Unless an admin maps it to an account of its own.
        let mut mapped = config(true, "nobody", false);
        mapped.user_map.insert("carol".into(), "daemon".into());
        mapped
            .user_map
            .insert("dave".into(), "gantry-no-such-account".into());
        assert_eq!(
            resolve(&mapped, "carol", false).unwrap().unwrap().name,
            "daemon"
        );
        assert!(matches!(
            resolve(&mapped, "dave", false),
            Err(IdentityError::NoMappedAccount { .. })
        ));
        let bad_fallback = config(true, "gantry-no-such-fallback", false);
        assert!(matches!(
            resolve(&bad_fallback, "gantry-no-such-user-xyz", true),
            Err(IdentityError::NoFallback { .. })
        ));
        assert_eq!(
            resolve(&config(false, "nobody", false), "root", false),
            Ok(None)
        );
    }

    #[test]
    fn an_anonymous_job_runs_as_the_fallback_never_as_the_user_it_names() {
        assert!(am_root(), "identity switching needs root (CI runs as root)");
        let on = config(true, "nobody", false);
        // `daemon` exists on Debian (uid 1): a claim of it is not honoured.
        let claimed = resolve(&on, "daemon", true).unwrap().unwrap();
        assert_eq!((claimed.name.as_str(), claimed.uid), ("nobody", 65534));
        assert_eq!(resolve(&on, "root", true), Err(IdentityError::Root));
        let none = config(true, "", false);
        assert_eq!(
            resolve(&none, "daemon", true),
            Err(IdentityError::Anonymous("daemon".into()))
        );
        assert_eq!(
            resolve(&on, "daemon", false).unwrap().unwrap().name,
            "daemon"
        );
    }
}
