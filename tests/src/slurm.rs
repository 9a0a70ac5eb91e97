//! A SLURM user's session against Gantry (issue 45): a daemon started as root, the
//! `gantry` binary with its SLURM links (`gantry slurm-links`) in a directory every account
//! may read, and commands run as `nobody` from nobody's own directory with those links first
//! on `PATH`, over the daemon's socket. For the Python clients (submitit, dask-jobqueue) a
//! venv made as nobody, installed from the wheels `scripts/slurm-clients` downloaded
//! from PyPI, and JupyterHub's proxy from npm (run here when they are missing; the test
//! fails if it cannot).
//!
//! Needs root (it switches users); callers say so through [`SlurmSession::start`].

use crate::Daemon;
use crate::as_user::{NOBODY, daemon_for_users, nobodys_dir, nobodys_file};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A daemon, the SLURM links and nobody's directory.
pub struct SlurmSession {
    /// The daemon (tasks run as their users).
    pub d: Daemon,
    /// Its Unix socket.
    pub socket: PathBuf,
    /// Where `gantry` and its links are (0755).
    pub bin: tempfile::TempDir,
    /// Nobody's directory, the working directory of every command.
    pub home: tempfile::TempDir,
}

impl SlurmSession {
    /// Starts the daemon with `gpus` fake GPUs and makes the links.
    pub fn start(gpus: u32) -> Self {
        crate::root::require_root("this test runs SLURM's commands as another account");
        let (d, socket) = daemon_for_users(gpus);
        let bin = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let gantry = bin.path().join("gantry");
        std::fs::copy(crate::gantry_bin(), &gantry).expect("copy the gantry binary");
        // Another test thread that forks while the copy is open for writing holds it until
        // its child execs: the kernel refuses to run it then (ETXTBSY). Try again briefly.
        let mut tries = 0;
        let made = loop {
            match Command::new(&gantry)
                .arg("slurm-links")
                .arg(bin.path())
                .output()
            {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.expect("gantry slurm-links"),
            }
        };
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        Self {
            d,
            socket,
            bin,
            home: nobodys_dir(),
        }
    }

    /// The environment nobody's commands get: the links first on `PATH`, the socket.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "PATH".into(),
                format!("{}:/usr/bin:/bin", self.bin.path().display()),
            ),
            ("USER".into(), "nobody".into()),
            ("HOME".into(), self.home.path().display().to_string()),
            (
                "GANTRY_SERVER".into(),
                format!("unix:{}", self.socket.display()),
            ),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }

    /// `program ARGS` as nobody in nobody's directory; a bare name is found on the session's
    /// `PATH` (the links first), as the user's shell finds it, with that name as `argv[0]`.
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(self.env())
            .current_dir(self.home.path())
            .uid(NOBODY)
            .gid(NOBODY)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `program ARGS` as nobody; its output.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        self.command(program, args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    }

    /// Runs `program ARGS` as nobody and expects success; its stdout.
    pub fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes `text` as nobody's file `name` in nobody's directory.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        nobodys_file(self.home.path(), name, text)
    }

    /// A venv of nobody's with `packages` installed from the downloaded wheels; its python.
    pub fn venv(&self, packages: &[&str]) -> PathBuf {
        let wheels = self.readable_wheels();
        let venv = self.home.path().join("venv");
        let made = self.run(
            "/usr/bin/python3",
            &["-m", "venv", &venv.display().to_string()],
        );
        assert!(
            made.status.success(),
            "python3 -m venv: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let pip = venv.join("bin/pip").display().to_string();
        let mut args = vec!["install", "-q", "--no-index", "--find-links"];
        let wheels_arg = wheels.display().to_string();
        args.push(&wheels_arg);
        args.extend_from_slice(packages);
        let installed = self.run(&pip, &args);
        assert!(
            installed.status.success(),
            "pip install {packages:?}: {}",
            String::from_utf8_lossy(&installed.stderr)
        );
        venv.join("bin/python")
    }

    /// JupyterHub's proxy from npm (`scripts/slurm-clients`), copied where nobody may run it;
    /// the path of its command.
    pub fn proxy(&self) -> PathBuf {
        let source = clients_dir().join("chp");
        let copy = self.bin.path().join("chp");
        let status = Command::new("cp")
            .arg("-r")
            .arg(&source)
            .arg(&copy)
            .status()
            .expect("cp");
        assert!(status.success(), "cannot copy {}", source.display());
        let status = Command::new("chmod")
            .arg("-R")
            .arg("a+rX")
            .arg(&copy)
            .status()
            .expect("chmod");
        assert!(status.success());
        copy.join("node_modules/.bin/configurable-http-proxy")
    }

    /// The wheels of `scripts/slurm-clients`, copied where nobody may read them.
    fn readable_wheels(&self) -> PathBuf {
        let source = clients_dir().join("wheels");
        let copy = self.bin.path().join("wheels");
        std::fs::create_dir_all(&copy).expect("mkdir");
        for entry in std::fs::read_dir(&source).expect("the wheel directory") {
            let path = entry.expect("entry").path();
            if let Some(name) = path.file_name() {
                std::fs::copy(&path, copy.join(name)).expect("copy a wheel");
                let mode = std::fs::Permissions::from_mode(0o644);
                std::fs::set_permissions(copy.join(name), mode).expect("chmod");
            }
        }
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        copy
    }
}

/// `target/slurm-clients` (wheels, the proxy), downloaded by `scripts/slurm-clients` if
/// missing.
fn clients_dir() -> PathBuf {
    let dir = crate::workspace().join("target/slurm-clients");
    if !dir.join("COMPLETE").exists() {
        let script = crate::workspace().join("scripts/slurm-clients");
        let status = Command::new(&script)
            .status()
            .expect("scripts/slurm-clients");
        assert!(
            status.success(),
            "scripts/slurm-clients could not download the SLURM clients from PyPI"
        );
    }
    dir
}

/// The lines of `text` that are not empty.
pub fn lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.trim().is_empty()).collect()
}

/// Whether `path` exists (for polling).
pub fn exists(path: &Path) -> bool {
    path.exists()
}
