//! The guard of "the client names every path once": the CLI (`host/cli/src`) and the binary
//! (`host/gantry/src`) call the API only through `gantry_api::client`'s typed methods, so no
//! path of the API (`"/v1/...`) is spelt in their code. A route the CLI starts to use gets a
//! method in `host/api/src/client/` first.
//!
//! Owns this test only.

#![allow(clippy::unwrap_used)]

fn code_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            code_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_cli_and_the_binary_spell_no_api_path() {
    let cli = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    code_files(&cli.join("src"), &mut files);
    code_files(&cli.join("../gantry/src"), &mut files);
    assert!(
        files.len() > 20,
        "found the sources ({} files)",
        files.len()
    );
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        // Tests may spell paths (they check what is sent); code may not.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            if line.contains("\"/v1/") || line.contains("\"/v1?") || line.contains("\"/cluster/") {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "API paths spelt outside gantry_api::client (add a typed method there):\n{}",
        found.join("\n")
    );
}
