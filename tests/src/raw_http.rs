//! Raw HTTP/1.1 over TCP for tests that need what the [`crate::Daemon`] helpers do not
//! send or return: any `Host`, `Origin` or `Content-Type` (or none), a request head without
//! its body, response headers, and a connection kept open (a stream, an idle connection).
//!
//! Owns: building requests and reading answers. Does not own any assertion but
//! [`Answer::error`] and [`Answer::refused`] (the API's JSON error shape).

use crate::Daemon;
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Answer {
    /// A header's value (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (panics otherwise).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("({}) not JSON ({e}): {:?}", self.status, self.text()))
    }

    /// Asserts a JSON error with `status` and a message; returns the error object.
    pub fn error(&self, status: u16) -> Value {
        let body = self.json();
        assert_eq!(self.status, status, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        body["error"].clone()
    }

    /// Asserts a JSON error with `status` naming `field`; returns the error object.
    pub fn refused(&self, status: u16, field: &str) -> Value {
        let error = self.error(status);
        assert_eq!(error["field"], field, "{error}");
        error
    }
}

/// The daemon's `host:port`.
pub fn addr(d: &Daemon) -> String {
    d.url().trim_start_matches("http://").to_string()
}

/// A connection to `addr` with a 60 s read timeout.
pub fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("cannot connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    s
}

/// A request: `method path`, the given headers, and `body` with its length when non-empty.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    if !body.is_empty() {
        head += &format!("Content-Length: {}\r\n", body.len());
    }
    let mut bytes = (head + "\r\n").into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Reads one answer (its body by `Content-Length`, else until the connection closes, or
/// none for a stream when `head_only`); `Err` when the connection ends before a head.
pub fn read_answer(s: &mut TcpStream, head_only: bool) -> std::io::Result<Answer> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut answer = Answer {
        status,
        headers,
        body: raw[head_end..].to_vec(),
    };
    if head_only && answer.status == 200 {
        return Ok(answer);
    }
    let length: Option<usize> = answer.header("content-length").and_then(|v| v.parse().ok());
    loop {
        if length.is_some_and(|l| answer.body.len() >= l) {
            break;
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        answer.body.extend_from_slice(&buf[..n]);
    }
    if let Some(l) = length {
        answer.body.truncate(l);
    }
    Ok(answer)
}

/// Sends `req` on a new connection and reads the answer.
pub fn exchange(addr: &str, req: &[u8]) -> Answer {
    let mut s = connect(addr);
    s.write_all(req).expect("cannot send the request");
    read_answer(&mut s, false).expect("no answer")
}

/// `GET path` with `Connection: close`, `Host: host`, plus `extra` headers.
pub fn get_as_host(addr: &str, host: &str, path: &str, extra: &[(&str, &str)]) -> Answer {
    let mut headers = vec![("Host", host), ("Connection", "close")];
    headers.extend_from_slice(extra);
    exchange(addr, &request("GET", path, &headers, b""))
}

/// `GET path` with the daemon's own address as Host.
pub fn get(addr: &str, path: &str, extra: &[(&str, &str)]) -> Answer {
    get_as_host(addr, addr, path, extra)
}
