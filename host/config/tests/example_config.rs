//! `examples/gantry.toml` is what it says it is (issue 46, item 6: it set `data_dir =
//! "gantry-data"` while saying it showed the defaults, which as root moved the data and the
//! socket into the current directory). Its lines not commented out are the defaults; so is
//! every commented `# key = value` unless its comment says "e.g." (an example of a change) or
//! "default:" (a default worked out at start).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_config::Config;
use std::path::{Path, PathBuf};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gantry.toml")
}

/// The example with its commented table headers and commented defaults uncommented; the
/// examples (a comment saying "e.g." or "default:", and whatever a commented `[[array]]`
/// table holds) left out. Also returns the keys uncommented, as `table.key`.
fn with_defaults_uncommented(text: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut keys = Vec::new();
    let mut table = String::new();
    let mut in_example_array = false;
    for line in text.lines() {
        let Some(body) = line.strip_prefix('#').map(str::trim_start) else {
            if let Some(name) = line.trim().strip_prefix('[') {
                table = name.trim_matches(|c| c == '[' || c == ']').to_string();
                in_example_array = false;
            }
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (code, comment) = body.split_once(" #").unwrap_or((body, ""));
        let code = code.trim();
        if code.starts_with("[[") {
            in_example_array = true;
            continue;
        }
        if let Some(name) = code.strip_prefix('[').and_then(|c| c.strip_suffix(']')) {
            let valid = name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            if valid {
                table = name.to_string();
                in_example_array = false;
                out.push_str(&format!("[{name}]\n"));
            }
            continue;
        }
        let Some((key, _)) = code.split_once(" = ") else {
            continue;
        };
        let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_key || in_example_array || comment.contains("e.g.") || comment.contains("default:") {
            continue;
        }
        keys.push(format!("{table}.{key}"));
        out.push_str(code);
        out.push('\n');
    }
    (out, keys)
}

/// The settings where `config` differs from the defaults, as TOML lines (`-` default, `+`
/// loaded).
fn differences(config: &Config) -> Vec<String> {
    let lines = |c: &Config| -> Vec<String> {
        let text = toml::to_string(c).unwrap();
        let mut table = String::new();
        text.lines()
            .filter_map(|l| {
                if l.starts_with('[') {
                    table = l.to_string();
                    return None;
                }
                (!l.trim().is_empty()).then(|| format!("{table} {l}"))
            })
            .collect()
    };
    let (loaded, defaults) = (lines(config), lines(&Config::default()));
    let mut out: Vec<String> = defaults
        .iter()
        .filter(|l| !loaded.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    out.extend(
        loaded
            .iter()
            .filter(|l| !defaults.contains(l))
            .map(|l| format!("+ {l}")),
    );
    out
}

#[test]
fn the_example_config_is_the_defaults() {
    let config = Config::load(Some(&example())).unwrap();
    assert!(
        config == Config::default(),
        "a line of examples/gantry.toml not commented out is not the default: comment it out, or say what it changes (\"e.g.\"):\n{}",
        differences(&config).join("\n")
    );
}

#[test]
fn every_commented_key_of_the_example_is_the_default_unless_it_says_it_is_an_example() {
    let text = std::fs::read_to_string(example()).unwrap();
    let (uncommented, keys) = with_defaults_uncommented(&text);
    // The header and the tables that stay commented are there to be uncommented.
    for key in [
        "execution.cgroups",
        "execution.run_as_user",
        "containers.cache_max_mib",
        "limits.max_log_mib",
        "cluster.local_node",
        "store.lease_s",
        "auth.anonymous_role",
    ] {
        assert!(
            keys.iter().any(|k| k == key),
            "{key} not uncommented: {keys:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gantry.toml");
    std::fs::write(&file, &uncommented).unwrap();
    let config = Config::load(Some(&file)).unwrap_or_else(|e| {
        panic!(
            "the example with its commented defaults uncommented does not load: {e}\n{uncommented}"
        )
    });
    assert!(
        config == Config::default(),
        "a commented line of examples/gantry.toml is not the default and does not say \"e.g.\":\n{}",
        differences(&config).join("\n")
    );
}
