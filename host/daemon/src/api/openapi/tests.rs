//! The OpenAPI document lists exactly the routes the router is built from (`api/routes.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::{OPERATIONS, document};
use std::collections::BTreeSet;

/// (method, path) of every route the router is built from (`routes.rs`).
fn registered() -> BTreeSet<(String, String)> {
    let routes = crate::api::routes::all();
    let out: BTreeSet<(String, String)> = routes
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(
        out.len(),
        routes.len(),
        "a method of a path is listed twice"
    );
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
