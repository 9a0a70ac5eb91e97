//! For the guard tests of "one owner" (`transition_tests.rs`, `job_edit_tests.rs`,
//! `state_owner_tests.rs`): every line of the controller's non-test code, so a test can say which files may write what.
//!
//! Owns this walk only (test builds).

#![allow(clippy::unwrap_used)]

/// `(file, line number, line)` of the code before `#[cfg(test)]` in every `.rs` file under the
/// daemon's `src/`, except `*tests.rs` files and those named in `allowed`.
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
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (n, line) in code.lines().enumerate() {
                lines.push((path.display().to_string(), n + 1, line.to_string()));
            }
        }
    }
    lines
}
