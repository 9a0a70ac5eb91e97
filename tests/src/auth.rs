//! Authentication in the harness: the `*_as(token, ...)` twins of the [`Daemon`]
//! request helpers, [`create_token`] (runs `gantry token create`) and [`Serve`], a bare
//! `gantry serve` on any address for start-up checks. The plain helpers send no token
//! and are unchanged.

use crate::{Daemon, POLL, WAIT, gantry_bin};
use serde_json::Value;
use std::fs::{self, File};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Instant;

/// Adds `Authorization: Bearer <token>` to a request when a token is given.
pub(crate) fn bearer<B>(
    r: ureq::RequestBuilder<B>,
    token: Option<&str>,
) -> ureq::RequestBuilder<B> {
    match token {
        Some(t) => r.header("authorization", format!("Bearer {t}")),
        None => r,
    }
}

/// A token made by `gantry token create`.
#[derive(Debug, Clone)]
pub struct CreatedToken {
    /// The token (stdout).
    pub token: String,
    /// What the command wrote to stderr (the `[[auth.tokens]]` entry, when no
    /// `--config` was given).
    pub stderr: String,
}

impl CreatedToken {
    /// The `[[auth.tokens]]` entry printed on stderr.
    pub fn snippet(&self) -> String {
        let start = self
            .stderr
            .find("[[auth.tokens]]")
            .unwrap_or_else(|| panic!("no [[auth.tokens]] in {:?}", self.stderr));
        let text = &self.stderr[start..];
        let end = text.find("\n\n").unwrap_or(text.len());
        text[..end].to_string()
    }
}

/// Runs `gantry token create` with `args` (e.g. `["--user", "alice", "--role", "user"]`),
/// asserting it succeeds and prints exactly one token line.
pub fn create_token(args: &[&str]) -> CreatedToken {
    let out = Command::new(gantry_bin())
        .args(["token", "create"])
        .args(args)
        .output()
        .expect("cannot run gantry token create");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "gantry token create {args:?} failed: {stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "stdout should hold only the token: {stdout:?}"
    );
    CreatedToken {
        token: lines[0].trim().to_string(),
        stderr,
    }
}

/// Creates a token for `user` (named after the user) with `accounts` (comma-separated) and
/// `role`, appending its hashed entry to the config file `config`; returns the token.
pub fn token_into(config: &std::path::Path, user: &str, accounts: &str, role: &str) -> String {
    let config = config.to_str().expect("config path is UTF-8");
    create_token(&[
        "--user",
        user,
        "--accounts",
        accounts,
        "--role",
        role,
        "--name",
        user,
        "--config",
        config,
    ])
    .token
}

impl Daemon {
    /// The daemon's base URL (`http://127.0.0.1:<port>`), for running the CLI against it.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// Any request as `token` (`None`: no Authorization header); status and raw body.
    pub fn request_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<(&[u8], &str)>,
    ) -> (u16, String) {
        let body = match (method, body) {
            ("POST" | "PUT", None) => Some((&b"{}"[..], "application/json")),
            (_, b) => b,
        };
        self.call_with(token, method, path, body)
    }

    fn json_as(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<(&[u8], &str)>,
    ) -> (u16, Value) {
        let (status, text) = self.request_as(Some(token), method, path, body);
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path} ({status}): not JSON ({e}): {text:?}"));
        (status, value)
    }

    /// GET as `token`, with a JSON answer.
    pub fn get_as(&self, token: &str, path: &str) -> (u16, Value) {
        self.json_as(token, "GET", path, None)
    }

    /// GET as `token`, with a text answer.
    pub fn get_text_as(&self, token: &str, path: &str) -> (u16, String) {
        self.request_as(Some(token), "GET", path, None)
    }

    /// POST a JSON body as `token`.
    pub fn post_as(&self, token: &str, path: &str, body: &Value) -> (u16, Value) {
        let bytes = body.to_string().into_bytes();
        self.json_as(token, "POST", path, Some((&bytes, "application/json")))
    }

    /// POST raw bytes as `token` (typed as [`crate::bytes_type`] says).
    pub fn post_bytes_as(&self, token: &str, path: &str, body: &[u8]) -> (u16, Value) {
        self.json_as(token, "POST", path, Some((body, crate::bytes_type(path))))
    }

    /// PUT a JSON body as `token`.
    pub fn put_as(&self, token: &str, path: &str, body: &Value) -> (u16, Value) {
        let bytes = body.to_string().into_bytes();
        self.json_as(token, "PUT", path, Some((&bytes, "application/json")))
    }

    /// DELETE as `token`, with a JSON answer.
    pub fn delete_as(&self, token: &str, path: &str) -> (u16, Value) {
        self.json_as(token, "DELETE", path, None)
    }

    /// Submits a job as `token`, asserting 201; returns its id.
    pub fn submit_as(&self, token: &str, spec: &Value) -> u64 {
        let (status, body) = self.post_as(token, "/v1/jobs", spec);
        assert_eq!(status, 201, "submit {spec} answered {body}");
        crate::id_of(&body)
    }
}

/// A bare `gantry serve` on `listen` with a given config, for start-up checks (the
/// [`Daemon`] harness always listens on loopback). Dropping it SIGKILLs it.
pub struct Serve {
    child: Child,
    dir: tempfile::TempDir,
}

impl Serve {
    /// Starts `gantry serve --listen <listen>` with `config` as its whole config file (plus
    /// the test `[execution]` defaults for the keys it does not set).
    pub fn start(listen: &str, config: &str) -> Self {
        let dir = tempfile::tempdir().expect("cannot create a temp dir");
        let path = |name: &str| dir.path().join(name);
        fs::write(path("gantry.toml"), crate::with_execution_defaults(config))
            .expect("cannot write the config");
        let child = Command::new(gantry_bin())
            .arg("serve")
            .arg("--config")
            .arg(path("gantry.toml"))
            .args(["--listen", listen, "--no-nvml", "--gpus", "1", "--data-dir"])
            .arg(path("data"))
            .stdin(Stdio::null())
            .stdout(File::create(path("out")).expect("cannot create stdout"))
            .stderr(File::create(path("err")).expect("cannot create stderr"))
            .spawn()
            .expect("cannot start gantry");
        Self { child, dir }
    }

    /// What it printed on stdout so far.
    pub fn stdout(&self) -> String {
        fs::read_to_string(self.dir.path().join("out")).unwrap_or_default()
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join("err")).unwrap_or_default()
    }

    /// Polls until it listens (`None`) or exits (`Some(status)`); panics after [`WAIT`].
    pub fn wait_listening_or_exit(&mut self) -> Option<ExitStatus> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("cannot poll gantry") {
                return Some(status);
            }
            if self.stdout().contains("gantry listening on") {
                return None;
            }
            assert!(
                Instant::now() < deadline,
                "gantry neither listened nor exited within {WAIT:?}: {}",
                self.stderr()
            );
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
