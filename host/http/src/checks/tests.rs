//! The request checks: Host, Origin and Content-Type decisions.

use super::*;
use crate::ConnInfo;
use crate::host::HostRules;
use axum::body::Body;
use std::sync::Arc;

fn request(method: &str, path: &str, headers: &[(&str, &str)], tcp: bool) -> Request {
    let mut b = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let mut req = b.body(Body::empty()).expect("request");
    if tcp {
        req.extensions_mut().insert(ConnInfo {
            peer: "127.0.0.1:50000".parse().expect("peer"),
            local: "127.0.0.1:8420".parse().expect("local"),
            rules: Arc::new(HostRules::new(&[], &[])),
        });
    }
    req
}

fn kind(path: &str) -> BodyKind {
    if path == "/v1/plugins" {
        BodyKind::Binary
    } else {
        BodyKind::Json
    }
}

fn field(r: &Request) -> Option<&'static str> {
    check(r, kind).err().map(|e| e.field)
}

#[test]
fn browser_form_types_and_untyped_bodies_are_refused() {
    let json = [("host", "127.0.0.1:8420"), ("content-length", "2")];
    let with = |ct: &str| {
        let mut h = json.to_vec();
        h.push(("content-type", ct));
        request("POST", "/v1/jobs", &h, true)
    };
    assert_eq!(field(&with("application/json")), None);
    assert_eq!(field(&with("Application/JSON; charset=utf-8")), None);
    for bad in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded",
        "application/octet-stream",
    ] {
        let e = check(&with(bad), kind).expect_err(bad);
        assert_eq!((e.status.as_u16(), e.field), (415, "content-type"), "{bad}");
    }
    assert_eq!(
        field(&request("POST", "/v1/jobs", &json, true)),
        Some("content-type"),
        "a body without a type"
    );
    let chunked = [("transfer-encoding", "chunked")];
    assert_eq!(
        field(&request("PUT", "/v1/policy", &chunked, false)),
        Some("content-type")
    );
    let empty = [("content-length", "0")];
    assert_eq!(
        field(&request("POST", "/v1/jobs/1/cancel", &empty, true)),
        None
    );
    assert_eq!(field(&request("DELETE", "/v1/jobs/1", &[], true)), None);
}

#[test]
fn uploads_take_any_type_but_the_browser_simple_ones() {
    let up = |ct: &str| {
        request(
            "POST",
            "/v1/plugins",
            &[("content-length", "4"), ("content-type", ct)],
            true,
        )
    };
    assert_eq!(field(&up("application/wasm")), None);
    assert_eq!(field(&up("application/octet-stream")), None);
    assert_eq!(field(&up("application/json")), None);
    assert_eq!(field(&up("")), Some("content-type"));
    assert_eq!(field(&up("text/plain")), Some("content-type"));
    assert_eq!(field(&up("multipart/form-data")), Some("content-type"));
}

#[test]
fn foreign_hosts_and_origins_are_refused_over_tcp_only() {
    let evil = [("host", "evil.example:8420")];
    let e = check(&request("GET", "/v1/jobs", &evil, true), kind).expect_err("evil host");
    assert_eq!((e.status.as_u16(), e.field), (421, "host"));
    assert_eq!(field(&request("GET", "/v1/jobs", &evil, false)), None);
    assert_eq!(
        field(&request(
            "GET",
            "http://evil.example/v1/jobs",
            &[("host", "127.0.0.1")],
            true
        )),
        Some("host"),
        "an absolute target names a host too"
    );
    let origin = |o: &str| {
        request(
            "POST",
            "/v1/jobs/1/cancel",
            &[("host", "127.0.0.1:8420"), ("origin", o)],
            true,
        )
    };
    assert_eq!(field(&origin("http://127.0.0.1:8420")), None);
    let e = check(&origin("http://evil.example"), kind).expect_err("cross-site");
    assert_eq!((e.status.as_u16(), e.field), (403, "origin"));
    assert_eq!(field(&origin("null")), Some("origin"));
    assert_eq!(
        field(&request("GET", "/v1/jobs", &[], true)),
        None,
        "no Host"
    );
}
