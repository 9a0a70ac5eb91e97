//! Hostile requests (issue 9, item 3): deep JSON, huge strings, negative and huge numbers,
//! unknown enum values, wrong types and a 1 GiB upload each get a 4xx with a JSON error
//! naming the field, at once; nothing refused is stored; the daemon's memory does not
//! grow with what it refused, and it keeps serving.
//!
//! Oversized bodies go over a raw TCP socket: the body comes from a generator (one 64 KiB
//! block written again and again, with a declared `Content-Length` or chunked), written by
//! a second thread while the test reads the answer, since the daemon answers 413 before
//! the client has finished sending. That the body was refused before it was read is shown
//! by the writer: after the answer the test leaves it to finish on its own (bounded), and
//! it must have failed (the daemon closed the connection) having sent only part of the body,
//! no more than the cap plus what the sockets' buffers hold.

use gantry_e2e::{Daemon, tasks};
use serde_json::{Value, json};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A 4xx must come within this, whatever the body.
const FAST: Duration = Duration::from_secs(10);

/// How long the writer of a refused body is left to end by itself after the answer.
const WRITER_BOUND: Duration = Duration::from_secs(30);

/// More than the loopback sockets' buffers (both sides) can hold of a body nobody reads.
const BUFFERED: u64 = 32 << 20;

/// A socket that counts the bytes it accepted.
struct Counting {
    inner: TcpStream,
    sent: Arc<AtomicU64>,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// What came back for one request, and what became of its body.
struct Exchange {
    status: u16,
    body: Value,
    took: Duration,
    /// Bytes of the body the socket accepted.
    sent: u64,
    /// The body's size.
    total: u64,
    /// Whether the writer sent the whole body without an error.
    write_ok: bool,
}

impl Exchange {
    /// Asserts the body was refused before it was read: the writer failed (the daemon
    /// closed the connection) and sent no more than `read_at_most` plus what the sockets
    /// buffer.
    fn assert_cut_off(&self, read_at_most: u64) {
        assert!(
            !self.write_ok,
            "the whole {} byte body was sent: the daemon read it all ({} {})",
            self.total, self.status, self.body
        );
        assert!(
            self.sent < self.total && self.sent <= read_at_most + BUFFERED,
            "{} of {} bytes were sent before the daemon stopped reading (at most {} expected)",
            self.sent,
            self.total,
            read_at_most + BUFFERED
        );
    }
}

/// A body: `prefix`, then `fill_len` copies of `fill`, then `suffix`.
struct Payload {
    prefix: Vec<u8>,
    fill: u8,
    fill_len: u64,
    suffix: Vec<u8>,
    chunked: bool,
}

fn write_body(w: &mut impl Write, p: &Payload) -> io::Result<()> {
    let block = vec![p.fill; 64 << 10];
    let piece = |w: &mut dyn Write, bytes: &[u8]| -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        if p.chunked {
            write!(w, "{:x}\r\n", bytes.len())?;
            w.write_all(bytes)?;
            w.write_all(b"\r\n")
        } else {
            w.write_all(bytes)
        }
    };
    piece(w, &p.prefix)?;
    let mut left = p.fill_len;
    while left > 0 {
        let n = usize::try_from(left.min(block.len() as u64)).expect("block size");
        piece(w, &block[..n])?;
        left -= n as u64;
    }
    piece(w, &p.suffix)?;
    if p.chunked {
        w.write_all(b"0\r\n\r\n")?;
    }
    Ok(())
}

/// Reads one HTTP/1.1 response with a `Content-Length`: status and body.
fn read_response(r: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = r.read(&mut buf).expect("reading the response head");
        assert!(n > 0, "connection closed before a response");
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head}"));
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("no Content-Length in {head}"));
    while raw.len() < head_end + length {
        let n = r.read(&mut buf).expect("reading the response body");
        assert!(n > 0, "connection closed inside the response body");
        raw.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&raw[head_end..head_end + length]).to_string();
    (status, body)
}

/// Sends `p` with `method path` over a fresh connection; the status, the JSON answer, how
/// long the answer took, and how much of the body was sent.
fn send(d: &Daemon, method: &str, path: &str, p: Payload) -> Exchange {
    let addr = d.url().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).expect("cannot connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let total = p.prefix.len() as u64 + p.fill_len + p.suffix.len() as u64;
    let framing = if p.chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {total}")
    };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).expect("writing the head");
    let sent = Arc::new(AtomicU64::new(0));
    let mut w = Counting {
        inner: stream.try_clone().expect("clone the socket"),
        sent: sent.clone(),
    };
    // The daemon may answer and close before the body is sent: write errors are expected.
    let writer = std::thread::spawn(move || write_body(&mut w, &p).is_ok());
    let (status, text) = read_response(&mut stream);
    let took = started.elapsed();
    // The writer ends by itself: done, or failed because the daemon closed. One still
    // blocked after the bound (a daemon that neither reads nor closes) is cut off here.
    let deadline = Instant::now() + WRITER_BOUND;
    while !writer.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = stream.shutdown(Shutdown::Both);
    let write_ok = writer.join().expect("the writer panicked");
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{method} {path} ({status}): not JSON ({e}): {text:?}"));
    Exchange {
        status,
        body,
        took,
        sent: sent.load(Ordering::Relaxed),
        total,
        write_ok,
    }
}

fn bytes(method: &str, d: &Daemon, path: &str, body: &[u8]) -> Exchange {
    let p = Payload {
        prefix: body.to_vec(),
        fill: 0,
        fill_len: 0,
        suffix: Vec::new(),
        chunked: false,
    };
    send(d, method, path, p)
}

/// Asserts a fast 4xx whose JSON error names `field`.
fn refused(answer: &Exchange, status: u16, field: &str) -> Value {
    let Exchange {
        status: got,
        body,
        took,
        ..
    } = answer;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["error"]["field"], field, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(*took < FAST, "a {status} took {took:?}");
    body.clone()
}

/// Resident memory of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn job(extra: Value) -> Vec<u8> {
    let mut spec = json!({"name": "hostile", "argv": ["true"], "tasks": tasks(1, 0)});
    for (k, v) in extra.as_object().expect("object") {
        spec[k] = v.clone();
    }
    spec.to_string().into_bytes()
}

#[test]
fn malformed_and_out_of_range_fields_are_named() {
    let d = Daemon::start(2);
    let post = |body: &[u8]| bytes("POST", &d, "/v1/jobs", body);
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    refused(&post(deep.as_bytes()), 400, "body");
    let deep_config = format!(
        r#"{{"placement": {{"plugin": "first-fit", "config": {}}}}}"#,
        deep
    );
    refused(
        &bytes("PUT", &d, "/v1/policy", deep_config.as_bytes()),
        400,
        "body",
    );
    for (extra, field) in [
        (json!({"kind": "nightly"}), "kind"),
        (json!({"time_limit_s": -1}), "time_limit_s"),
        (json!({"time_limit_s": 1e30}), "time_limit_s"),
        (json!({"tier": 1u64 << 40}), "tier"),
        (
            json!({"tasks": [{"count": 1, "gpus": -1}]}),
            "tasks[0].gpus",
        ),
        (
            json!({"tasks": [{"count": 1}, {"memory_mib": u64::MAX}]}),
            "tasks[1].memory_mib",
        ),
        (
            json!({"tasks": [{"cpu_milli": 4_294_967_296u64}]}),
            "tasks[0].cpu_milli",
        ),
        (json!({"argv": "true"}), "argv"),
        (json!({"argv": ["true", 7]}), "argv[1]"),
        (json!({"tasks": {"count": 1}}), "tasks"),
        (json!({"preemptible": "yes"}), "preemptible"),
        (json!({"env": {"A": 1}}), "env.A"),
        (json!({"labels": {"team": ["a"]}}), "labels.team"),
        (json!({"name": "x".repeat(300_000)}), "name"),
        (json!({"workdir": ""}), "workdir"),
    ] {
        refused(&post(&job(extra)), 400, field);
    }
    let long_key = json!({"env": {("K".repeat(1000)): "v"}});
    refused(
        &post(&job(long_key)),
        400,
        &format!("env.{}", "K".repeat(64)),
    );
    refused(&post(b"42"), 400, "body");
    refused(
        &post(b"{\"argv\": [\"x\"], \"name\": \"\xff\"}"),
        400,
        "body",
    );
    let (status, body) = d.get("/v1/jobs?state=nightly");
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("query")),
        "{body}"
    );
    let (status, body) = d.get("/v1/jobs?limit=-1");
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("query")),
        "{body}"
    );
    let (status, body) = d.get("/v1/jobs/-1");
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("id")),
        "{body}"
    );
    let (_, list) = d.get("/v1/jobs");
    assert_eq!(list, json!([]), "a refused job was stored");
}

#[test]
fn oversized_bodies_are_413_before_they_are_read_and_memory_stays_flat() {
    let d = Daemon::start(2);
    // Larger than the sockets can buffer, so a body read to its end shows.
    let big_name = |chunked| Payload {
        prefix: br#"{"argv": ["true"], "name": ""#.to_vec(),
        fill: b'a',
        fill_len: 4 * BUFFERED,
        suffix: br#""}"#.to_vec(),
        chunked,
    };
    for chunked in [false, true] {
        let answer = send(&d, "POST", "/v1/jobs", big_name(chunked));
        refused(&answer, 413, "body");
        // JSON bodies are capped at 1 MiB.
        answer.assert_cut_off(1 << 20);
        eprintln!(
            "{} MiB job (chunked: {chunked}): {} bytes sent before the daemon closed",
            answer.total >> 20,
            answer.sent
        );
    }
    let (_, plugins_before) = d.get("/v1/plugins");
    let before = rss_kib(d.pid());
    let one_gib = |chunked| Payload {
        prefix: b"\0asm".to_vec(),
        fill: 0x5a,
        fill_len: (1 << 30) - 4,
        suffix: Vec::new(),
        chunked,
    };
    // Declared 1 GiB: refused from the header. Chunked: cut off at the 64 MiB limit.
    for chunked in [false, true] {
        let answer = send(&d, "POST", "/v1/plugins", one_gib(chunked));
        let body = refused(&answer, 413, "body");
        assert_eq!(body["error"]["code"], "too-large", "{body}");
        // Declared: nothing of the body need be read; chunked: 64 MiB at most.
        answer.assert_cut_off(if chunked { 64 << 20 } else { 0 });
        eprintln!(
            "1 GiB upload (chunked: {chunked}): {} bytes sent before the daemon closed",
            answer.sent
        );
    }
    let after = rss_kib(d.pid());
    eprintln!("daemon RSS before the 1 GiB uploads: {before} KiB, after: {after} KiB");
    assert!(
        after < before + (64 << 10),
        "RSS grew from {before} KiB to {after} KiB after refusing two 1 GiB uploads"
    );
    let (_, plugins_after) = d.get("/v1/plugins");
    assert_eq!(plugins_before, plugins_after, "a refused upload was stored");
    let (status, _) = d.get("/v1/health");
    assert_eq!(status, 200, "the daemon stopped serving");
    let id = d.submit(&json!({"name": "after", "argv": ["true"], "tasks": tasks(1, 0)}));
    d.wait_state(id, "succeeded");
}

#[test]
fn the_openapi_document_describes_every_route() {
    let d = Daemon::start(1);
    let (status, doc) = d.get("/v1/openapi.json");
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["openapi"], "3.0.3");
    let paths = doc["paths"].as_object().expect("paths");
    for path in [
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/plugins",
        "/v1/policy",
        "/v1/replay",
    ] {
        assert!(paths.contains_key(path), "{path} missing");
    }
    let submit = &doc["paths"]["/v1/jobs"]["post"];
    assert!(submit["responses"]["413"].is_object(), "{submit}");
    assert_eq!(
        doc["components"]["schemas"]["TaskSpec"]["properties"]["gpus"]["maximum"],
        64
    );
}
