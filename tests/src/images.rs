//! Container images for the end-to-end tests: a tiny image built from the distribution's
//! busybox-static with `umoci`, and a real `docker-registry` on 127.0.0.1.
//!
//! Needs umoci, busybox-static and docker-registry (`.ci/run` installs them); a missing tool
//! fails the test that asked for it, never skips it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a tool to success, or panics with what it printed.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An OCI layout at `dir/layout` tagged `test`: busybox and a marker file.
pub fn build_image(dir: &Path) -> PathBuf {
    let layout = dir.join("layout");
    let src = dir.join("rootfs-src");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    std::fs::create_dir_all(src.join("etc")).unwrap();
    std::fs::copy("/bin/busybox", src.join("bin/busybox"))
        .expect("busybox-static must be installed (/bin/busybox)");
    for tool in [
        "sh", "cat", "id", "ls", "sleep", "echo", "touch", "test", "tty", "stty",
    ] {
        std::os::unix::fs::symlink("busybox", src.join("bin").join(tool)).unwrap();
    }
    std::fs::write(src.join("etc/gantry-image"), "gantry-test-image\n").unwrap();
    let l = layout.to_str().unwrap();
    run(Command::new("umoci").args(["init", "--layout", l]));
    run(Command::new("umoci").args(["new", "--image", &format!("{l}:test")]));
    run(Command::new("umoci")
        .args(["insert", "--image", &format!("{l}:test")])
        .arg(&src)
        .arg("/"));
    run(Command::new("umoci").args([
        "config",
        "--image",
        &format!("{l}:test"),
        "--config.env",
        "PATH=/bin",
    ]));
    publish(&layout);
    layout
}

/// Makes the layout at `layout` readable by every account, as an image an administrator
/// publishes is: umoci writes blobs 0600, and a job reads its local image with its user's
/// rights. Call it again after changing the layout.
pub fn publish(layout: &Path) {
    run(Command::new("chmod").args(["-R", "a+rX"]).arg(layout));
}

/// A `docker-registry` on a free port of 127.0.0.1, stopped on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`, as an image reference starts.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts one and waits until it listens.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry must be installed");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "the registry never listened on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy on a free port of 127.0.0.1 that forwards to `target` at about
/// `bytes_per_s` towards the client (a slow registry, to watch a pull under way); stopped
/// on drop. Written in Python (`.ci/run` installs python3).
pub struct SlowProxy {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl SlowProxy {
    /// Starts one in front of `target` (`host:port`) and waits until it listens.
    pub fn start(target: &str, bytes_per_s: u64) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (host, tport) = target.rsplit_once(':').unwrap();
        let script = format!(
            r#"
import socket, threading, time
RATE = {bytes_per_s}
def pipe(src, dst, slow):
    try:
        while True:
            data = src.recv(16384)
            if not data:
                break
            dst.sendall(data)
            if slow:
                time.sleep(len(data) / RATE)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(client):
    upstream = socket.create_connection(("{host}", {tport}))
    threading.Thread(target=pipe, args=(client, upstream, False), daemon=True).start()
    pipe(upstream, client, True)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", {port}))
listener.listen(64)
while True:
    c, _ = listener.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#
        );
        let child = Command::new("python3")
            .arg("-c")
            .arg(script)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 must be installed");
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "the proxy never listened on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, addr }
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
