//! Finds the field a JSON deserialization error is about, so a 400 can say
//! `tasks[0].gpus` or `kind` rather than only "line 1 column 57".
//!
//! serde_json's errors carry a position, not a path. On a data error (wrong type, value
//! out of range, unknown enum variant, unknown or missing field) the body is parsed as a
//! [`Value`] and narrowed: at each level the document is cut down to the path so far plus
//! one child; the child whose cut-down document reproduces the error, while the document
//! without it does not, is where the error lies. Bounded: at most [`MAX_DEPTH`] levels and
//! [`MAX_TRIALS`] trial parses, only ever on the error path.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Deepest path reported.
const MAX_DEPTH: usize = 16;
/// Most trial parses for one error.
const MAX_TRIALS: usize = 2048;
/// Longest key echoed in a path.
const MAX_KEY: usize = 64;

/// One step of a path.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// The path (`tasks[0].gpus`) of the error whose message, without its position, is
/// `core`; `named` is the field a missing-field error names. `None` when the error is
/// about the document as a whole.
pub fn locate<T: DeserializeOwned>(body: &[u8], core: &str, named: Option<&str>) -> Option<String> {
    let root: Value = serde_json::from_slice(body).ok()?;
    let mut path: Vec<Seg> = Vec::new();
    let mut node = &root;
    let mut trials = 0;
    'descend: while path.len() < MAX_DEPTH {
        let children: Vec<(Seg, &Value)> = match node {
            Value::Object(m) => m.iter().map(|(k, v)| (Seg::Key(k.clone()), v)).collect(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| (Seg::Index(i), v))
                .collect(),
            _ => break,
        };
        if children.is_empty() || reproduces::<T>(prune(&root, &path, None), core) {
            break;
        }
        for (seg, child) in children {
            trials += 1;
            if trials > MAX_TRIALS {
                break 'descend;
            }
            if reproduces::<T>(prune(&root, &path, Some((&seg, child))), core) {
                path.push(seg);
                node = child;
                continue 'descend;
            }
        }
        break;
    }
    if core.starts_with("missing field")
        && let Some(n) = named
    {
        path.push(Seg::Key(n.to_string()));
    }
    (!path.is_empty()).then(|| format_path(&path))
}

/// Whether parsing `doc` as `T` fails with the same message.
fn reproduces<T: DeserializeOwned>(doc: Value, core: &str) -> bool {
    serde_json::from_value::<T>(doc).is_err_and(|e| e.to_string() == core)
}

/// `root` cut down to `path`, ending in only `child` (or in an empty container).
fn prune(v: &Value, path: &[Seg], child: Option<(&Seg, &Value)>) -> Value {
    match path.split_first() {
        Some((seg, rest)) => {
            let next = match (seg, v) {
                (Seg::Key(k), Value::Object(m)) => m.get(k),
                (Seg::Index(i), Value::Array(a)) => a.get(*i),
                _ => None,
            };
            wrap(seg, prune(next.unwrap_or(&Value::Null), rest, child))
        }
        None => match (child, v) {
            (Some((seg, c)), _) => wrap(seg, c.clone()),
            (None, Value::Object(_)) => Value::Object(Map::new()),
            (None, Value::Array(_)) => Value::Array(Vec::new()),
            (None, other) => other.clone(),
        },
    }
}

fn wrap(seg: &Seg, inner: Value) -> Value {
    match seg {
        Seg::Key(k) => {
            let mut m = Map::new();
            m.insert(k.clone(), inner);
            Value::Object(m)
        }
        Seg::Index(_) => Value::Array(vec![inner]),
    }
}

fn format_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let end = (0..=k.len().min(MAX_KEY))
                    .rev()
                    .find(|i| k.is_char_boundary(*i))
                    .unwrap_or(0);
                out.push_str(&k[..end]);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}
