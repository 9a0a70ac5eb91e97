//! `gantry plugin new --lang rust|python|js NAME` and `gantry plugin build [DIR]`, the
//! habit of `spin new` / `spin build`: a working project (a manifest, one priority stage,
//! a test), then a component built with the toolchains of the Gantry checkout
//! (`scripts/plugin-toolchains`: componentize-py, componentize-qjs; the `wasm32-wasip2`
//! target for Rust) and checked with `gantry plugin test` against the project's scenarios.
//!
//! The home (its `wit/`, `sdk/` and toolchains) is `GANTRY_HOME`, else the nearest
//! directory above the `gantry` binary that has them (a checkout), else `../share/gantry`
//! beside the binary's directory (a package: `/usr/bin/gantry` reads `/usr/share/gantry`,
//! which `scripts/package-deb` fills). A package carries no toolchains: componentize-py and
//! componentize-qjs are then looked for on `PATH`.
//!
//! A client-side command: the toolchains run as whoever typed `gantry plugin build`, in
//! that person's environment, on their own project. The daemon never calls this module
//! (it only loads the component it is given, in the sandbox).
//!
//! Owns: the manifest `gantry-plugin.toml`, writing a project, running the toolchains.
//! Does not own the conformance checks (`gantry_policy::conformance`) nor the texts
//! (`templates.rs`).

mod templates;
#[cfg(test)]
mod tests;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The manifest's file name.
pub const MANIFEST: &str = "gantry-plugin.toml";

/// The contract a new project speaks: for Rust the newest (the SDK's default, 0.3); for
/// Python and JavaScript 0.2, the newest their SDKs build (`gantry_incremental` keeps the
/// view; 0.3 adds only `gpu.parent`, which those SDKs do not model yet).
fn contract_for(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => gantry_contract::CONTRACT_VERSION,
        Lang::Python | Lang::Js => "0.2.0",
    }
}

/// The folder a checkout must have.
const CONTRACT: &str = gantry_contract::CONTRACT_VERSION;

/// A project's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Rust with the `gantry-sdk` crate.
    Rust,
    /// Python with componentize-py.
    Python,
    /// JavaScript with componentize-qjs.
    Js,
}

/// `gantry-plugin.toml`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The plugin's name (as its metadata says) and the component's file name.
    pub name: String,
    /// Its language.
    pub lang: Lang,
    /// The world it is built against (`priority-plugin`, ...; `wit/0.1.0/worlds.wit`).
    pub world: String,
    /// The contract version.
    pub contract: String,
    /// The deadline per call `gantry plugin build` tests with, ms (default 100, the
    /// daemon's); a plugin that needs more needs it in the pipeline too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
}

/// Where a package puts the home, from the binary's directory (`/usr/bin` → `/usr/share/gantry`).
const INSTALLED_HOME: &str = "../share/gantry";

/// Whether `d` has what a project is made and built with: the contract's WIT and the SDKs.
fn is_home(d: &Path) -> bool {
    d.join("wit").join(CONTRACT).join("worlds.wit").is_file()
        && d.join("sdk/rust/Cargo.toml").is_file()
}

/// Where the Gantry checkout or package is: `GANTRY_HOME`, else [`home_of_exe`] of the
/// running binary.
pub fn gantry_home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("GANTRY_HOME") {
        let home = PathBuf::from(home);
        if !is_home(&home) {
            bail!(
                "GANTRY_HOME={} is not a Gantry checkout (no wit/{CONTRACT} and sdk/)",
                home.display()
            );
        }
        return Ok(home);
    }
    let exe = std::env::current_exe().context("where is this gantry binary")?;
    home_of_exe(&exe).with_context(|| {
        format!(
            "no Gantry checkout above {} and no {INSTALLED_HOME} beside it (wit/, sdk/): set GANTRY_HOME",
            exe.display()
        )
    })
}

/// The home of the binary at `exe`: the nearest directory above it that is one (a
/// checkout), else [`INSTALLED_HOME`] from its directory (a package).
fn home_of_exe(exe: &Path) -> Option<PathBuf> {
    if let Some(checkout) = exe.ancestors().skip(1).find(|d| is_home(d)) {
        return Some(checkout.to_path_buf());
    }
    let installed = exe.parent()?.join(INSTALLED_HOME);
    is_home(&installed).then(|| std::fs::canonicalize(&installed).unwrap_or(installed))
}

/// Checks a plugin name: lower-case letters, digits and `-`, starting with a letter.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        bail!("plugin name {name:?}: 1 to 64 of a-z, 0-9 and -, starting with a letter");
    }
    Ok(())
}

/// Makes a new project named `name` in `dir` (default `./NAME`); the directory made.
pub fn new(name: &str, lang: Lang, dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    check_name(name)?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() {
        bail!("{} already exists: pick another directory", dir.display());
    }
    new_in(&gantry_home()?, name, lang, &dir)?;
    Ok(dir)
}

/// [`new`] with the SDKs of `home`.
fn new_in(home: &Path, name: &str, lang: Lang, dir: &Path) -> anyhow::Result<()> {
    let mut files = match lang {
        Lang::Rust => templates::rust(name, &home.join("sdk/rust")),
        Lang::Python => templates::python(name),
        Lang::Js => templates::javascript(name),
    };
    files.push(templates::scenario());
    let manifest = Manifest {
        name: name.to_string(),
        lang,
        world: "priority-plugin".into(),
        contract: contract_for(lang).into(),
        // An interpreter in a sandbox: Python takes about 100 ms for 5,000 pending jobs
        // here, JavaScript about 50 (100 on a busy machine), so those projects ask for more
        // than the daemon's 100 ms, and say so in their manifest (`sdk/python/README.md`).
        deadline_ms: match lang {
            Lang::Python => Some(500),
            Lang::Js => Some(200),
            Lang::Rust => None,
        },
    };
    let mut text = String::from(
        "# A Gantry plugin project (gantry plugin new). `gantry plugin build` reads it.\n",
    );
    if manifest.deadline_ms.is_some() {
        text.push_str(
            "# deadline_ms: what `plugin build` tests with; set the same `deadline_ms` for this\n\
             # plugin in the pipeline (the daemon's default is 100 ms).\n",
        );
    }
    text.push_str(&toml::to_string(&manifest)?);
    files.push((MANIFEST.into(), text));
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Reads `dir`'s manifest.
pub fn manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (make a project with gantry plugin new)",
            path.display()
        )
    })?;
    let m: Manifest = toml::from_str(&text).with_context(|| path.display().to_string())?;
    check_name(&m.name).with_context(|| path.display().to_string())?;
    if gantry_contract::served_as(&m.contract) != Some(m.contract.as_str()) {
        bail!(
            "{}: contract {} is not served by this gantry ({})",
            path.display(),
            m.contract,
            gantry_contract::SERVED_VERSIONS.join(", ")
        );
    }
    let worlds = [
        "admission-plugin",
        "priority-plugin",
        "placement-plugin",
        "preemption-plugin",
        "full-plugin",
    ];
    if !worlds.contains(&m.world.as_str()) {
        bail!(
            "{}: world {:?} is not one of {worlds:?}",
            path.display(),
            m.world
        );
    }
    Ok(m)
}

/// Builds the project in `dir` into `dir/NAME.wasm`; the component's path.
pub fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    let m = manifest(dir)?;
    let home = gantry_home()?;
    let dir = std::fs::canonicalize(dir).with_context(|| dir.display().to_string())?;
    let out = dir.join(format!("{}.wasm", m.name));
    let wit = home.join("wit").join(&m.contract);
    match m.lang {
        Lang::Rust => {
            let target = dir.join("target");
            let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cargo
                .args([
                    "build",
                    "--release",
                    "--target",
                    "wasm32-wasip2",
                    "--manifest-path",
                ])
                .arg(dir.join("Cargo.toml"))
                .arg("--target-dir")
                .arg(&target);
            for var in [
                "RUSTFLAGS",
                "CARGO_ENCODED_RUSTFLAGS",
                "CARGO_TARGET_DIR",
                "CARGO_BUILD_TARGET",
            ] {
                cargo.env_remove(var);
            }
            run(
                &mut cargo,
                "cargo (is the target installed? rustup target add wasm32-wasip2)",
            )?;
            let artifact = target
                .join("wasm32-wasip2/release")
                .join(format!("{}.wasm", m.name.replace('-', "_")));
            std::fs::copy(&artifact, &out)
                .with_context(|| format!("copying {}", artifact.display()))?;
        }
        Lang::Python => {
            let py = toolchain(
                &home,
                "target/toolchains/py/bin/componentize-py",
                "pip install componentize-py==0.25.1",
                std::env::var_os("PATH").as_deref(),
            )?;
            run(
                Command::new(&py)
                    .arg("-d")
                    .arg(&wit)
                    .args(["-w", &m.world, "componentize", "--stub-wasi", "-p"])
                    .arg(home.join("sdk/python/lib"))
                    .arg("-p")
                    .arg(&dir)
                    .arg("app")
                    .arg("-o")
                    .arg(&out),
                "componentize-py",
            )?;
        }
        Lang::Js => {
            let qjs = toolchain(
                &home,
                "sdk/js/node_modules/.bin/componentize-qjs",
                "npm install -g componentize-qjs@0.4.5",
                std::env::var_os("PATH").as_deref(),
            )?;
            // The SDK's modules beside the policy, as the examples are built; `gantry.js`'s
            // `host` import names the project's contract version.
            let staging = tempfile::tempdir()?;
            for entry in std::fs::read_dir(home.join("sdk/js/lib"))? {
                let path = entry?.path();
                if path.extension().is_some_and(|e| e == "js")
                    && let Some(file) = path.file_name()
                {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| path.display().to_string())?
                        .replace(
                            "gantry:policy/host@0.1.0",
                            &format!("gantry:policy/host@{}", m.contract),
                        );
                    std::fs::write(staging.path().join(file), text)?;
                }
            }
            let policy = staging.path().join("policy.js");
            std::fs::copy(dir.join("policy.js"), &policy)
                .with_context(|| format!("copying {}", dir.join("policy.js").display()))?;
            run(
                Command::new(&qjs)
                    .arg("-w")
                    .arg(&wit)
                    .arg("-j")
                    .arg(&policy)
                    .arg("--module-root")
                    .arg(staging.path())
                    .args(["-n", &m.world, "--sync", "--stub-wasi", "-o"])
                    .arg(&out),
                "componentize-qjs",
            )?;
        }
    }
    Ok(out)
}

/// The guest toolchain at `in_home` inside `home` (a checkout's, `scripts/plugin-toolchains`),
/// else its file name on `path` (a package has none of its own; `install` says how to get it).
fn toolchain(
    home: &Path,
    in_home: &str,
    install: &str,
    path: Option<&std::ffi::OsStr>,
) -> anyhow::Result<PathBuf> {
    let tool = home.join(in_home);
    if tool.exists() {
        return Ok(tool);
    }
    let name = tool.file_name().unwrap_or_default();
    if let Some(found) = path
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    {
        return Ok(found);
    }
    let setup = home.join("scripts/plugin-toolchains");
    if setup.is_file() {
        bail!(
            "{} is missing: run {} once",
            tool.display(),
            setup.display()
        );
    }
    bail!(
        "{} is not on PATH (nor in {}): {install}",
        name.display(),
        home.display()
    );
}

fn run(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("could not run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}
