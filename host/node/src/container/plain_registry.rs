//! Telling, before a job is accepted, that its image's registry speaks plain HTTP while it is
//! not listed in `[containers] insecure_registries`: the pull would fail after the job
//! started, with skopeo's "server gave HTTP response to HTTPS client". Only a registry named
//! with a port or on this machine (`localhost`, `127.0.0.1`, `[::1]`) is asked, as plain-HTTP
//! registries are; the question is one fixed `GET /v2/` over a plain connection, bounded in
//! time and size, and the answer counts only when it is a registry's (the
//! `Docker-Distribution-Api-Version` header), so an HTTPS server that answers plain HTTP with
//! an error page is not taken for one.
//!
//! Owns the probe. Does not own when it is asked (the controller's `image_check`) nor pulls.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long the probe may take, connect and answer each.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);
/// The most of the answer read.
const MAX_ANSWER: u64 = 4096;

/// The registry host (`host[:port]`) of a registry image reference, if it names one that a
/// plain-HTTP registry could be: with a port, or on this machine.
pub fn probed_host(reference: &str) -> Option<&str> {
    let (host, rest) = reference.split_once('/')?;
    if rest.is_empty() || !(host.contains('.') || host.contains(':') || host == "localhost") {
        return None;
    }
    let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let local = matches!(name, "localhost" | "127.0.0.1" | "[::1]");
    (host.contains(':') && !host.ends_with(']') || local).then_some(host)
}

/// Whether `host` (`host:port`, port 80 when none) answers `GET /v2/` over plain HTTP as a
/// registry does. Unreachable, slow or anything else: `false`.
pub fn speaks_plain_http(host: &str) -> bool {
    let target = if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let Some(addr) = target.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(PROBE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(PROBE_TIMEOUT));
    let request = format!("GET /v2/ HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = (&mut stream).take(MAX_ANSWER).read_to_end(&mut answer);
    is_registry_answer(&answer)
}

/// Whether `answer` is a plain-HTTP response carrying a registry's API version header.
fn is_registry_answer(answer: &[u8]) -> bool {
    let text = String::from_utf8_lossy(answer).to_ascii_lowercase();
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    head.starts_with("http/1.")
        && head
            .lines()
            .any(|l| l.starts_with("docker-distribution-api-version:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_registries_with_a_port_or_on_this_machine_are_asked() {
        assert_eq!(
            probed_host("127.0.0.1:5000/team/img:v1"),
            Some("127.0.0.1:5000")
        );
        assert_eq!(
            probed_host("registry.lab:8443/img"),
            Some("registry.lab:8443")
        );
        assert_eq!(probed_host("localhost/img"), Some("localhost"));
        assert_eq!(probed_host("registry.lab/team/img"), None);
        assert_eq!(probed_host("busybox"), None);
        assert_eq!(probed_host("library/busybox"), None);
        assert_eq!(probed_host("ghcr.io/org/img"), None);
    }

    #[test]
    fn a_registrys_plain_answer_is_told_from_an_https_servers_error_page() {
        let registry = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDocker-Distribution-Api-Version: registry/2.0\r\n\r\n{}";
        assert!(is_registry_answer(registry));
        let nginx = b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n\r\nThe plain HTTP request was sent to HTTPS port";
        assert!(!is_registry_answer(nginx));
        assert!(!is_registry_answer(b"\x15\x03\x01\x00\x02\x02\x46"));
        assert!(!is_registry_answer(b""));
    }

    #[test]
    fn a_port_where_nothing_listens_is_not_a_plain_registry() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(!speaks_plain_http(&format!("127.0.0.1:{port}")));
    }
}
