//! Guards of the controller's facade (`facade.rs`, issue 44 item 3): every `impl` of
//! `Controller` and its five sub-handles stands in `facade.rs` (in the server only the
//! router state's `FromRef` glue, `api/state.rs`), the handles stay thin (at most
//! [`MAX_HANDLE_METHODS`] public methods in all), and of the server only `serve.rs` names the
//! `Scheduler` (it opens it, runs its loop and builds the `Controller`).
//!
//! The check is textual: it reads this crate's sources and the server's
//! ([`SERVER_SRC`]). A file that declares its own type of one of these names may implement it.

use std::path::{Path, PathBuf};

/// The server's sources, from this crate's directory.
const SERVER_SRC: &str = "../server/src";

/// The server's file that holds the router state's `FromRef` impls for the handles.
const SERVER_STATE_FILE: &str = "server/api/state.rs";

/// The facade's types.
const FACADE_TYPES: [&str; 6] = ["Controller", "Jobs", "Nodes", "Policy", "Services", "Admin"];

/// The five sub-handles, whose public methods are counted.
const HANDLES: [&str; 5] = ["Jobs", "Nodes", "Policy", "Services", "Admin"];

/// Most public methods of the five handles together (the issue aims at about 45).
const MAX_HANDLE_METHODS: usize = 59;

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

/// `(path, text)` of every source file of this crate (`controller/...`) and of the server
/// (`server/...`).
fn crate_sources() -> Vec<(String, String)> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = sources_under(&here.join("src"), "controller");
    all.extend(sources_under(&here.join(SERVER_SRC), "server"));
    assert!(
        all.iter().any(|(f, _)| f == "server/serve.rs"),
        "the server's sources were not found under {SERVER_SRC}"
    );
    all
}

/// `(prefix/relative path, text)` of every `.rs` file under `root`.
fn sources_under(root: &Path, prefix: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    sources(root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read a source file");
            let rel = p.strip_prefix(root).expect("under src").to_string_lossy();
            (format!("{prefix}/{}", rel.replace('\\', "/")), text)
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
        if file == "controller/facade.rs" {
            continue;
        }
        if file == SERVER_STATE_FILE {
            // Only the router state's glue: `impl ApiState` and `impl FromRef<ApiState> for ..`.
            for (n, line) in text.lines().enumerate() {
                let l = line.trim_start();
                if l.starts_with("impl ")
                    && !l.starts_with("impl ApiState ")
                    && !l.starts_with("impl FromRef<ApiState> for ")
                {
                    outside.push(format!("{file}:{}: {}", n + 1, line.trim()));
                }
            }
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
        "impl blocks of the controller's facade outside controller/facade.rs:\n{}",
        outside.join("\n")
    );
}

#[test]
fn handles_stay_thin() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/facade.rs");
    let text = std::fs::read_to_string(root).expect("read facade.rs");
    let mut counts: Vec<(&str, usize)> = HANDLES.iter().map(|h| (*h, 0)).collect();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("impl ") {
            current = HANDLES.iter().position(|h| t == format!("{h} {{"));
        } else if line.starts_with('}') {
            current = None;
        } else if let Some(i) = current
            && ["pub fn ", "pub async fn "]
                .iter()
                .any(|p| line.trim_start().starts_with(p))
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
        .filter(|(file, _)| file.starts_with("server/") && file != "server/serve.rs")
        .filter(|(_, text)| has_word(text, "Scheduler"))
        .map(|(file, _)| file)
        .collect();
    assert!(
        named.is_empty(),
        "outside serve.rs the server uses the facade (Controller, Jobs, ...), \
         not the Scheduler: {named:?}"
    );
}
