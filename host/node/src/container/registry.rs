//! Asking a registry about an image with `skopeo inspect`, without copying it: the layers
//! a pull will fetch (for its progress), and the digest a tag names now (so that every rank
//! of a gang runs the same image even if the tag moves while they start).
//!
//! Owns: those questions and skopeo's registry flags. Does not own copying (`image_store`).

use super::pull_progress::{self, Layer};
use super::{Containers, find_tool};
use std::path::Path;
use std::process::{Command, Stdio};

/// How long a question to a registry may take (skopeo's `--command-timeout`): a registry
/// that never answers holds no thread of the daemon or the shim for good.
const INSPECT_TIMEOUT: &str = "120s";

/// skopeo's flags for a registry reached without TLS verification (`insecure`) or with
/// the credentials in `auth` (`--src-...` for `copy`, no prefix for `inspect`).
pub(crate) fn flags(cmd: &mut Command, prefix: &str, insecure: bool, auth: Option<&Path>) {
    if insecure {
        cmd.arg(format!("--{prefix}tls-verify=false"));
    }
    if let Some(auth) = auth {
        cmd.arg(format!("--{prefix}authfile")).arg(auth);
    }
}

/// The layers of `reference` as its registry lists them (empty when it cannot be asked:
/// the copy then says why).
pub(crate) fn layers(
    skopeo: &Path,
    insecure: bool,
    auth: Option<&Path>,
    reference: &str,
) -> Vec<Layer> {
    let inspect = |name: &str| -> Option<Vec<u8>> {
        let mut cmd = Command::new(skopeo);
        cmd.args(["--command-timeout", INSPECT_TIMEOUT]);
        cmd.args(["inspect", "--raw", "--retry-times", "1"]);
        flags(&mut cmd, "", insecure, auth);
        let out = cmd
            .arg(format!("docker://{name}"))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    };
    let Some(manifest) = inspect(reference) else {
        return Vec::new();
    };
    match pull_progress::layers_of(&manifest) {
        Ok(layers) => layers,
        Err(Some(platform)) => {
            let name = format!("{}@{platform}", pull_progress::repository_of(reference));
            inspect(&name)
                .and_then(|m| pull_progress::layers_of(&m).ok())
                .unwrap_or_default()
        }
        Err(None) => Vec::new(),
    }
}

/// The manifest digest `reference` (a registry tag) names now, asked with this node's
/// registry settings; the reference unchanged when it already names a digest.
pub fn resolve_digest(containers: &Containers, reference: &str) -> Result<String, String> {
    if reference.contains('@') {
        return Ok(reference.to_string());
    }
    let skopeo = find_tool("skopeo").ok_or("skopeo is not installed")?;
    let mut cmd = Command::new(skopeo);
    cmd.args(["--command-timeout", INSPECT_TIMEOUT]);
    cmd.args(["inspect", "--retry-times", "1", "--format", "{{.Digest}}"]);
    flags(
        &mut cmd,
        "",
        containers.insecure(reference),
        containers.config.auth_file.as_deref(),
    );
    let out = cmd
        .arg(format!("docker://{reference}"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run skopeo: {e}"))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr);
        return Err(text.trim().chars().take(500).collect());
    }
    let digest = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "the registry answered `{digest}`, not a sha256 digest"
        ));
    }
    Ok(format!(
        "{}@{digest}",
        pull_progress::repository_of(reference)
    ))
}
