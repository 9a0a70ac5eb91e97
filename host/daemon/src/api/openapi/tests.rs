//! The OpenAPI document lists exactly the routes `api/mod.rs` registers.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::{OPERATIONS, document};
use std::collections::BTreeSet;

const METHODS: [&str; 4] = ["get", "post", "put", "delete"];

/// (method, path) of every `.route("path", method(..).method(..))` in `api/mod.rs`.
fn registered() -> BTreeSet<(String, String)> {
    let source = include_str!("../mod.rs");
    let mut out = BTreeSet::new();
    let calls: Vec<&str> = source.split(".route(").skip(1).collect();
    assert!(calls.len() > 10, "found only {} routes", calls.len());
    for call in calls {
        let call = call.split(".fallback(").next().unwrap_or(call);
        let path = call.split('"').nth(1).expect("a route without a path");
        let bytes = call.as_bytes();
        for m in METHODS {
            let mut from = 0;
            while let Some(i) = call[from..].find(&format!("{m}(")) {
                let at = from + i;
                let before = at.checked_sub(1).map(|b| bytes[b]);
                if !before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                    out.insert((m.to_string(), path.to_string()));
                }
                from = at + m.len();
            }
        }
    }
    out
}

#[test]
fn every_registered_route_is_documented_and_nothing_else() {
    let routes = registered();
    assert!(routes.contains(&("get".into(), "/v1/openapi.json".into())));
    assert!(routes.contains(&("delete".into(), "/v1/policy/shadow".into())));
    let documented: BTreeSet<(String, String)> = OPERATIONS
        .iter()
        .map(|op| (op.0.to_string(), op.1.to_string()))
        .collect();
    assert_eq!(routes, documented);
    let doc = document();
    for (method, path) in &routes {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} missing from the document");
        assert!(op["responses"].as_object().is_some_and(|r| !r.is_empty()));
    }
}

#[test]
fn the_document_is_well_formed() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.0.3");
    let text = doc.to_string();
    // Every $ref resolves.
    for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = piece.split('"').next().unwrap();
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "dangling $ref {name}"
        );
    }
    let submit = &doc["paths"]["/v1/jobs"]["post"];
    for code in ["201", "400", "401", "403", "413", "422"] {
        assert!(submit["responses"][code].is_object(), "submit lacks {code}");
    }
    let spec = &doc["components"]["schemas"]["JobSpec"]["properties"];
    assert_eq!(spec["name"]["maxLength"], 256);
    assert_eq!(spec["kind"]["enum"][2], "service");
    // Open routes say so; the rest need the bearer token.
    assert_eq!(
        doc["paths"]["/v1/health"]["get"]["security"],
        serde_json::json!([])
    );
    assert!(doc["paths"]["/v1/nodes"]["get"]["security"].is_null());
}
