//! For the guard tests of "one owner" (`transition_tests.rs`, `job_edit_tests.rs`,
//! `state_owner_tests.rs`, `runner_tests.rs`): every line of the controller's non-test code,
//! and [`outside_owners`], the check they share: which calls appear outside the files allowed
//! to make them.
//!
//! Owns this walk and that check only (test builds).

#![allow(clippy::unwrap_used)]

/// `(file, line number, line)` of the code before its test module (`#[cfg(test)]` on an item
/// with a body) in every `.rs` file under the controller's `src/`, except `*tests.rs` files
/// and those named in `allowed`.
pub(crate) fn code_lines(allowed: &[&str]) -> Vec<(String, usize, String)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src];
    let mut lines = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".rs") || name.ends_with("tests.rs") || allowed.contains(&&*name) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let all: Vec<&str> = text.lines().collect();
            for (n, line) in all.iter().enumerate() {
                // `#[cfg(test)]` on an item with a body (`mod tests { .. }`) starts the test
                // code; on a declaration (`mod runner_tests;`) it hides only that line.
                if line.trim() == "#[cfg(test)]"
                    && !all
                        .get(n + 1)
                        .is_some_and(|next| next.trim_end().ends_with(';'))
                {
                    break;
                }
                lines.push((path.display().to_string(), n + 1, line.to_string()));
            }
        }
    }
    lines
}

/// One rule of a guard: what it keeps, the calls that change it, the files that may make them.
pub(crate) type OwnerRule<'a> = (&'a str, &'a [&'a str], &'a [&'a str]);

/// What breaks `rules`: each line of code (before a `//` comment) that makes a rule's call
/// outside the rule's files, as `path:line: what: text`; and the rules whose calls no line
/// makes at all (a renamed call would otherwise pass the guard quietly).
pub(crate) fn outside_owners<'a>(rules: &[OwnerRule<'a>]) -> (Vec<String>, Vec<&'a str>) {
    let lines = code_lines(&[]);
    assert!(
        lines.iter().any(|(f, _, _)| f.ends_with("lib.rs")),
        "the scan found no sources"
    );
    let mut found = Vec::new();
    let mut seen = vec![false; rules.len()];
    for (path, n, line) in &lines {
        let code = line.split("//").next().unwrap_or_default();
        let name = std::path::Path::new(path)
            .file_name()
            .unwrap()
            .to_string_lossy();
        for (k, (what, calls, owners)) in rules.iter().enumerate() {
            if calls.iter().any(|c| code.contains(c)) {
                seen[k] = true;
                if !owners.contains(&&*name) {
                    found.push(format!("{path}:{n}: {what}: {}", line.trim()));
                }
            }
        }
    }
    let stale = rules
        .iter()
        .zip(seen)
        .filter(|(_, seen)| !seen)
        .map(|((what, ..), _)| *what)
        .collect();
    (found, stale)
}
