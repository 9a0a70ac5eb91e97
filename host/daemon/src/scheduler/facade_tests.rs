//! Guards of the controller's facade (`facade.rs`, issue 44 item 3): every `impl` of
//! `Controller` and its five sub-handles stands in `facade.rs`, the handles stay thin (at most
//! [`MAX_HANDLE_METHODS`] public methods in all), and outside `scheduler/` only `serve.rs`
//! names the `Scheduler` (it opens it, runs its loop and builds the `Controller`).
//!
//! The check is textual: it reads the crate's sources. A file that declares its own type of
//! one of these names (the agent's `Controller` in `agent/heartbeat.rs`) may implement it.

use std::path::{Path, PathBuf};

/// The facade's types.
const FACADE_TYPES: [&str; 6] = ["Controller", "Jobs", "Nodes", "Policy", "Services", "Admin"];

/// The five sub-handles, whose public methods are counted.
const HANDLES: [&str; 5] = ["Jobs", "Nodes", "Policy", "Services", "Admin"];

/// Most public methods of the five handles together (the issue aims at about 45).
const MAX_HANDLE_METHODS: usize = 60;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("read the source directory");
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

fn crate_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read a source file");
            let rel = p.strip_prefix(&root).expect("under src").to_string_lossy();
            (rel.replace('\\', "/"), text)
        })
        .collect()
}

/// Whether `word` stands in `text` as a whole identifier.
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// The facade type an `impl` line is for (`impl X`, `impl<..> X<..>`, `impl T for X`), or
/// that it implements for another type (`impl FromRef<Controller> for ..`).
fn impl_of(line: &str) -> Option<&'static str> {
    let line = line.trim_start();
    let rest = line.strip_prefix("impl")?;
    if !rest.starts_with([' ', '<']) {
        return None;
    }
    let head = rest.split('{').next().unwrap_or(rest);
    FACADE_TYPES.into_iter().find(|t| has_word(head, t))
}

/// Whether `text` declares its own type named `name`.
fn declares(text: &str, name: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        let l = l
            .strip_prefix("pub(crate) ")
            .or(l.strip_prefix("pub "))
            .unwrap_or(l);
        [format!("struct {name}"), format!("enum {name}")]
            .iter()
            .any(|d| {
                l.strip_prefix(d.as_str())
                    .is_some_and(|r| !r.starts_with(char::is_alphanumeric))
            })
    })
}

#[test]
fn facade_impls_live_in_facade_rs() {
    let mut outside = Vec::new();
    for (file, text) in crate_sources() {
        if file == "scheduler/facade.rs" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if let Some(t) = impl_of(line)
                && !declares(&text, t)
            {
                outside.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "impl blocks of the controller's facade outside scheduler/facade.rs:\n{}",
        outside.join("\n")
    );
}

#[test]
fn handles_stay_thin() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scheduler/facade.rs");
    let text = std::fs::read_to_string(root).expect("read facade.rs");
    let mut counts: Vec<(&str, usize)> = HANDLES.iter().map(|h| (*h, 0)).collect();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("impl ") {
            current = HANDLES.iter().position(|h| t == format!("{h} {{"));
        } else if line.starts_with('}') {
            current = None;
        } else if let Some(i) = current
            && line.trim_start().starts_with("pub fn ")
        {
            counts[i].1 += 1;
        }
    }
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    assert!(
        counts.iter().all(|(_, n)| *n > 0),
        "a handle with no methods: {counts:?}"
    );
    assert!(
        total <= MAX_HANDLE_METHODS,
        "the five handles have {total} public methods ({counts:?}); at most {MAX_HANDLE_METHODS}: \
         move what is not the server's into the scheduler's owners"
    );
}

#[test]
fn only_serve_names_the_scheduler_outside_it() {
    let named: Vec<String> = crate_sources()
        .into_iter()
        .filter(|(file, _)| !file.starts_with("scheduler/") && file != "serve.rs")
        .filter(|(_, text)| has_word(text, "Scheduler"))
        .map(|(file, _)| file)
        .collect();
    assert!(
        named.is_empty(),
        "outside scheduler/ (and serve.rs) the server uses the facade (Controller, Jobs, ...), \
         not the Scheduler: {named:?}"
    );
}
