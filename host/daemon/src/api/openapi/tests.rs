//! The OpenAPI document lists exactly the routes the router is built from (`api/routes.rs`),
//! and its schemas are generated from the types (every field, the validation limits, 3.0 forms).

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::{OPERATIONS, document};
use crate::model::{
    JobRecord, JobSpec, MAX_ARGS, MAX_PATH, MAX_REQUEUES, MAX_SCRIPT, MAX_STRING, MAX_TASKS,
    MAX_TIME_LIMIT_S, TaskSpec,
};
use serde_json::{Value, json};
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

/// The keys of a value's JSON object form.
fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn the_schemas_are_generated_from_the_types() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let mut spec: JobSpec = serde_json::from_value(json!({"argv": ["true"]})).unwrap();
    spec.anonymous = true; // the one field left out of the JSON when unset
    let record = JobRecord::new(1, spec.clone(), 0);
    for (name, value) in [
        ("JobSpec", serde_json::to_value(&spec).unwrap()),
        ("JobRecord", serde_json::to_value(&record).unwrap()),
        (
            "TaskSpec",
            serde_json::to_value(TaskSpec::default()).unwrap(),
        ),
    ] {
        let properties = keys(&schemas[name]["properties"]);
        assert_eq!(properties, keys(&value), "{name}: schema and JSON differ");
    }
    assert_eq!(
        schemas["JobSpec"]["properties"]["anonymous"]["readOnly"],
        true
    );
    // The limits on the fields are those `JobSpec::validate` enforces.
    let spec = &schemas["JobSpec"]["properties"];
    assert_eq!(spec["name"]["maxLength"], MAX_STRING);
    assert_eq!(spec["queue"]["maxLength"], MAX_STRING);
    assert_eq!(spec["script"]["maxLength"], MAX_SCRIPT);
    assert_eq!(spec["workdir"]["maxLength"], MAX_PATH);
    assert_eq!(spec["argv"]["maxItems"], MAX_ARGS);
    assert_eq!(spec["time_limit_s"]["maximum"], MAX_TIME_LIMIT_S);
    assert_eq!(spec["max_requeues"]["maximum"], MAX_REQUEUES);
    assert_eq!(
        schemas["TaskSpec"]["properties"]["count"]["maximum"],
        MAX_TASKS
    );
    assert_eq!(
        schemas["DrainRequest"]["properties"]["reason"]["maxLength"],
        crate::scheduler::nodes::MAX_REASON
    );
    // OpenAPI 3.0 forms only: `nullable`, no `"type": [T, "null"]` or `{"type": "null"}`.
    let text = doc.to_string();
    assert!(
        !text.contains("\"null\""),
        "an OpenAPI 3.1 null type is left"
    );
    assert!(!text.contains("propertyNames"));
    assert_eq!(spec["script"]["type"], "string");
    assert_eq!(spec["script"]["nullable"], true);
    assert_eq!(spec["array"]["nullable"], true);
    assert_eq!(
        spec["array"]["allOf"][0]["$ref"],
        "#/components/schemas/ArraySpec"
    );
}
