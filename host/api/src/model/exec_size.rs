//! What `execve` will accept, checked at submit so that a job which could never start is
//! refused with a 400 naming the field instead of failing every launch with "Argument
//! list too long" until its requeue limit.
//!
//! Linux refuses a single argument or `NAME=value` string of more than `MAX_ARG_STRLEN`
//! (32 pages: 131,072 bytes, its NUL included), and all of them together (with their
//! pointers) over a quarter of the stack limit (`ARG_MAX`, 2 MiB with the usual 8 MiB
//! stack). A job's argv and env may take [`MAX_EXEC_BYTES`], half of that, leaving the rest
//! to the variables the daemon adds (`GANTRY_*`, `CUDA_VISIBLE_DEVICES`, `PATH`, `HOME`...)
//! and to hosts with a smaller stack limit. A job's `script` is written to a file, not
//! passed to `execve`, so only its own limit applies.
//!
//! Owns: these limits. Does not own the other field limits (`model`) or launching
//! (`executor`).

use super::{FieldError, bad, short};
use std::collections::BTreeMap;

/// Longest single argument or `NAME=value` string `execve` takes, its NUL included.
pub const MAX_ARG_STRLEN: usize = 32 * 4096;
/// Longest argv element: [`MAX_ARG_STRLEN`] less its NUL.
pub const MAX_ARG_LEN: usize = MAX_ARG_STRLEN - 1;
/// Most bytes of a job's argv and env together (each string with its NUL, an env entry
/// with its `=`): half of the usual `ARG_MAX`.
pub const MAX_EXEC_BYTES: usize = 1 << 20;

/// Checks every argv element and env entry against [`MAX_ARG_STRLEN`] and their sum
/// against [`MAX_EXEC_BYTES`]. Expects names already checked (non-empty, no `=` or NUL).
pub(super) fn check(argv: &[String], env: &BTreeMap<String, String>) -> Result<(), FieldError> {
    let mut argv_bytes = 0usize;
    for (i, a) in argv.iter().enumerate() {
        if a.len() > MAX_ARG_LEN || a.contains('\0') {
            return Err(bad(
                format!("argv[{i}]"),
                format!(
                    "must be at most {MAX_ARG_LEN} bytes without NUL (execve refuses a \
                     longer argument); it has {} bytes",
                    a.len()
                ),
            ));
        }
        argv_bytes += a.len() + 1;
    }
    let mut env_bytes = 0usize;
    for (k, v) in env {
        let entry = k.len() + 1 + v.len() + 1;
        if v.contains('\0') || entry > MAX_ARG_STRLEN {
            return Err(bad(
                format!("env.{}", short(k)),
                format!(
                    "`{}=value` must be at most {MAX_ARG_STRLEN} bytes with its NUL, without \
                     NUL inside (execve refuses a longer variable); this one has {entry}",
                    short(k)
                ),
            ));
        }
        env_bytes += entry;
    }
    if argv_bytes + env_bytes > MAX_EXEC_BYTES {
        let field = if argv_bytes > env_bytes {
            "argv"
        } else {
            "env"
        };
        return Err(bad(
            field,
            format!(
                "argv ({argv_bytes} bytes) and env ({env_bytes} bytes) together must be at \
                 most {MAX_EXEC_BYTES} bytes, half of what execve takes (put large data in \
                 a file, or in `script`)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn env(pairs: &[(&str, usize)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, n)| ((*k).to_string(), "v".repeat(*n)))
            .collect()
    }

    #[test]
    fn one_string_over_max_arg_strlen_is_refused_naming_it() {
        let argv = vec!["x".to_string()];
        // "FOO=" + value + NUL is exactly MAX_ARG_STRLEN: accepted; one more byte is not.
        check(&argv, &env(&[("FOO", MAX_ARG_STRLEN - 5)])).unwrap();
        let e = check(&argv, &env(&[("FOO", MAX_ARG_STRLEN - 4)])).unwrap_err();
        assert_eq!(e.field, "env.FOO");
        let e = check(&argv, &env(&[("FOO", 130 * 1024)])).unwrap_err();
        assert_eq!(e.field, "env.FOO");
        check(&["a".repeat(MAX_ARG_LEN)], &BTreeMap::new()).unwrap();
        let e = check(&["x".into(), "a".repeat(MAX_ARG_LEN + 1)], &BTreeMap::new()).unwrap_err();
        assert_eq!(e.field, "argv[1]");
        let e = check(&["a\0b".into()], &BTreeMap::new()).unwrap_err();
        assert_eq!(e.field, "argv[0]");
    }

    #[test]
    fn the_sum_is_bounded_and_names_the_larger_part() {
        let argv = vec!["x".to_string()];
        let many: Vec<(String, usize)> = (0..9).map(|i| (format!("V{i}"), 120 * 1024)).collect();
        let refs: Vec<(&str, usize)> = many.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        let e = check(&argv, &env(&refs)).unwrap_err();
        assert_eq!(e.field, "env");
        assert!(e.message.contains("1048576"), "{}", e.message);
        let big_argv: Vec<String> = (0..9).map(|_| "a".repeat(120 * 1024)).collect();
        assert_eq!(
            check(&big_argv, &BTreeMap::new()).unwrap_err().field,
            "argv"
        );
        check(&argv, &env(&refs[..8])).unwrap();
    }
}
