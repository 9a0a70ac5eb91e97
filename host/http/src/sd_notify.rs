//! systemd's readiness protocol (`sd_notify(3)`), for `gantry serve` and `gantry agent` run
//! as `Type=notify` units (`packaging/systemd/`): [`ready`] once the daemon answers,
//! [`stopping`] when SIGTERM (or Ctrl-C) begins its shutdown.
//!
//! systemd names a datagram socket in `NOTIFY_SOCKET`: a path, or an abstract name written
//! with a leading `@`. Without the variable (started by hand, by a test, by another
//! supervisor) both calls do nothing. A message that cannot be sent is logged and otherwise
//! ignored: the daemon serves the same either way, and a unit that never hears `READY=1`
//! fails its start on its own (`TimeoutStartSec=`). The variable is left set: tasks do not
//! see it (the shim clears their environment), and systemd takes messages from the unit's
//! main process only (`NotifyAccess=main`, the default).
//!
//! Owns: the message format and sending it. Does not own when the daemon is ready (the
//! callers: `gantry_server::serve`, `gantry_agent::run`) nor the units.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

/// The variable systemd names its socket in.
pub const SOCKET_ENV: &str = "NOTIFY_SOCKET";

/// Tells systemd the daemon is ready (`READY=1`), with `status` as the line `systemctl
/// status` shows. Sent again, it only updates that line. A no-op without `NOTIFY_SOCKET`.
pub fn ready(status: &str) {
    send_to_env_socket(&ready_message(status));
}

/// Tells systemd the daemon is shutting down (`STOPPING=1`). A no-op without `NOTIFY_SOCKET`.
pub fn stopping() {
    send_to_env_socket(STOPPING);
}

/// The stopping message.
const STOPPING: &str = "STOPPING=1\nSTATUS=stopping; running tasks keep running\n";

/// `READY=1` with `status` (on one line: a newline would start another assignment).
fn ready_message(status: &str) -> String {
    let status: String = status
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("READY=1\nSTATUS={status}\n")
}

/// Sends `message` to the socket `NOTIFY_SOCKET` names, if it names one; logs a failure.
fn send_to_env_socket(message: &str) {
    send_logged(std::env::var_os(SOCKET_ENV).as_deref(), message);
}

/// Sends `message` to `socket` when there is one; a failure is logged, never returned.
fn send_logged(socket: Option<&OsStr>, message: &str) {
    let Some(socket) = socket.filter(|s| !s.is_empty()) else {
        return;
    };
    match notify(socket, message) {
        Ok(()) => tracing::debug!(socket = %socket.display(), sent = message, "told systemd"),
        Err(e) => tracing::warn!(
            socket = %socket.display(),
            "cannot tell systemd {:?}: {e}",
            message.lines().next().unwrap_or_default()
        ),
    }
}

/// Sends `message` as one datagram to `socket`: an absolute path, or `@name` for the
/// abstract name `name`.
pub fn notify(socket: &OsStr, message: &str) -> io::Result<()> {
    let datagram = UnixDatagram::unbound()?;
    let bytes = socket.as_bytes();
    let sent = match bytes.first() {
        Some(b'@') => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(&bytes[1..])?;
            datagram.send_to_addr(message.as_bytes(), &addr)?
        }
        Some(b'/') => datagram.send_to(message.as_bytes(), Path::new(socket))?,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{SOCKET_ENV}={} is neither an absolute path nor an @abstract name",
                    socket.display()
                ),
            ));
        }
    };
    if sent != message.len() {
        return Err(io::Error::other(format!(
            "sent {sent} of {} bytes",
            message.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A socket bound where systemd's would be, and what it received.
    fn listener(path: &Path) -> UnixDatagram {
        let socket = UnixDatagram::bind(path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        socket
    }

    fn received(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = socket.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn ready_and_stopping_reach_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let socket = listener(&path);
        send_logged(
            Some(path.as_os_str()),
            &ready_message("serving on http://127.0.0.1:8420"),
        );
        assert_eq!(
            received(&socket),
            "READY=1\nSTATUS=serving on http://127.0.0.1:8420\n"
        );
        send_logged(Some(path.as_os_str()), STOPPING);
        assert!(received(&socket).starts_with("STOPPING=1\n"));
    }

    #[test]
    fn an_abstract_name_is_reached_through_its_at_sign() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("gantry-sd-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let socket = UnixDatagram::bind_addr(&addr).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        notify(OsStr::new(&format!("@{name}")), "READY=1\n").unwrap();
        assert_eq!(received(&socket), "READY=1\n");
    }

    #[test]
    fn the_status_stays_on_one_line() {
        assert_eq!(
            ready_message("a\nMAINPID=1"),
            "READY=1\nSTATUS=a MAINPID=1\n"
        );
    }

    #[test]
    fn without_a_socket_nothing_is_sent_and_a_bad_one_is_only_logged() {
        send_logged(None, "READY=1\n");
        send_logged(Some(OsStr::new("")), "READY=1\n");
        // Not fatal: logged, and the caller goes on.
        send_logged(Some(OsStr::new("relative/notify")), "READY=1\n");
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nobody-listens");
        send_logged(Some(missing.as_os_str()), "READY=1\n");
        assert!(notify(missing.as_os_str(), "READY=1\n").is_err());
        assert_eq!(
            notify(OsStr::new("relative/notify"), "READY=1\n")
                .unwrap_err()
                .kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
