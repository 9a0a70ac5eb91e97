//! The OpenAPI document lists exactly the routes the router is built from (`api/routes.rs`),
//! and its schemas are generated from the types (every field, the validation limits, 3.0 forms);
//! the rules it adds between fields are the server's, its examples are accepted, and the
//! events of `/v1/stream` are what their schema says.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::super::routes::all;
use serde_json::Value as Json;

/// The document of the routes the router is built from.
fn document() -> Json {
    super::document(&all())
}

use gantry_api::model::{
    JobRecord, JobSpec, MAX_ARG_LEN, MAX_ARGS, MAX_PATH, MAX_REQUEUES, MAX_SCRIPT, MAX_STRING,
    MAX_TASKS, MAX_TIME_LIMIT_S, TaskSpec,
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
    let doc = document();
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .map(move |method| (method.clone(), path.clone()))
        })
        .collect();
    assert_eq!(routes, documented);
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
    let mut record = JobRecord::new(1, spec.clone(), 0);
    // Left out of the JSON when unset (answers set it on pending jobs).
    record.start_forecast = Some(gantry_api::model::StartForecast {
        p50_ms: None,
        p90_ms: None,
        reason: String::new(),
        computed_ms: 0,
    });
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
        gantry_controller::nodes::MAX_REASON
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

#[test]
fn every_refinement_lands_where_it_says() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    for (name, pointer, extra) in super::schemas::refinements() {
        let target = schemas[name]
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{name}{pointer}: no such schema or field"));
        for (key, value) in extra.as_object().unwrap() {
            assert_eq!(&target[key], value, "{name}{pointer}: {key}");
        }
    }
}

#[test]
fn the_documented_limits_are_those_the_server_checks() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let no_control = super::schemas::NO_CONTROL;
    let spec = &schemas["JobSpec"]["properties"];
    for field in ["name", "user", "account", "queue"] {
        assert_eq!(spec[field]["pattern"], no_control, "JobSpec.{field}");
    }
    assert_eq!(
        spec["workdir"]["pattern"],
        format!("^/{}", &no_control[1..]),
        "an absolute path without control characters"
    );
    assert_eq!(spec["env"]["maxProperties"], 256);
    assert_eq!(spec["labels"]["maxProperties"], 64);
    assert_eq!(spec["argv"]["items"]["maxLength"], MAX_ARG_LEN);
    assert_eq!(
        schemas["ServiceSpec"]["properties"]["port"]["maximum"],
        u16::MAX
    );
    let pipeline = &schemas["PipelineSpec"]["properties"];
    for chain in ["admission", "priority"] {
        assert_eq!(pipeline[chain]["maxItems"], gantry_policy::MAX_CHAIN);
    }
    assert_eq!(
        schemas["PluginRef"]["properties"]["config"]["type"],
        "object"
    );
    // Every signal the pattern names is one a job may ask for, and each by name and number.
    let pattern = super::schemas::SIGNAL;
    let alternatives = pattern
        .strip_prefix("^(")
        .and_then(|p| p.strip_suffix(")$"))
        .unwrap();
    let number = |s: &str| {
        gantry_api::model::job_options::WarnSignal {
            signal: s.into(),
            before_s: 0,
            scope: Default::default(),
        }
        .number()
    };
    let (mut by_name, mut by_number) = (BTreeSet::new(), BTreeSet::new());
    for alternative in alternatives.split('|') {
        let n = number(alternative).unwrap_or_else(|e| panic!("{alternative}: {e}"));
        if alternative.parse::<i32>().is_ok() {
            by_number.insert(n);
        } else {
            by_name.insert(n);
        }
    }
    assert_eq!(by_name, by_number);
    assert!(number("KILL").is_err() && number("9").is_err());
    for name in ["WarnSignal", "SignalRequest"] {
        assert_eq!(schemas[name]["properties"]["signal"]["pattern"], pattern);
    }
}

#[test]
fn the_rules_between_fields_are_the_servers() {
    let valid = |body: Value| {
        let mut spec: JobSpec = serde_json::from_value(body).unwrap();
        spec.validate().map_err(|e| e.field)
    };
    // JobSpec's anyOf: a non-empty argv or a script (the server also refuses both).
    assert!(valid(json!({"argv": ["true"], "script": null})).is_ok());
    assert!(valid(json!({"script": "true", "argv": []})).is_ok());
    assert!(valid(json!({"argv": ["true"], "script": "true"})).is_err());
    assert!(valid(json!({"argv": [], "script": null})).is_err());
    assert!(valid(json!({})).is_err());
    assert!(valid(json!({"script": " \n\u{85}"})).is_err(), "blank");
    // Service settings only on a service.
    assert!(valid(json!({"argv": ["x"], "service": {}})).is_err());
    assert!(valid(json!({"argv": ["x"], "kind": "service", "service": {}})).is_ok());
    // TaskSpec's: whole GPUs or a fraction; models only with either.
    let task = |t: Value| valid(json!({"argv": ["x"], "tasks": [t]}));
    assert!(task(json!({"gpus": 1, "gpu_milli": 500})).is_err());
    assert!(task(json!({"gpu_models": ["a100"]})).is_err());
    assert!(task(json!({"gpu_milli": 500, "gpu_models": ["a100"]})).is_ok());
    // HealthCheck's: an HTTP path or a command.
    let health =
        |h: Value| valid(json!({"argv": ["x"], "kind": "service", "service": {"health": h}}));
    assert!(health(json!({})).is_err());
    assert!(health(json!({"http_path": "/h", "command": ["true"]})).is_err());
    assert!(health(json!({"http_path": "/h"})).is_ok());
    assert!(health(json!({"command": ["true"]})).is_ok());
}

#[test]
fn the_request_examples_are_accepted() {
    let doc = document();
    let example = |path: &str, method: &str| {
        doc["paths"][path][method]["requestBody"]["content"]["application/json"]["example"].clone()
    };
    let mut spec: JobSpec = serde_json::from_value(example("/v1/jobs", "post")).unwrap();
    spec.validate().unwrap();
    let builtin: BTreeSet<&str> = gantry_components::BUILTIN.iter().map(|(n, _)| *n).collect();
    for (path, method) in [
        ("/v1/policy", "put"),
        ("/v1/policy/shadow", "put"),
        ("/v1/replay", "post"),
    ] {
        let body = example(path, method);
        let pipeline = body.get("pipeline").unwrap_or(&body).clone();
        let spec: gantry_policy::PipelineSpec = serde_json::from_value(pipeline).unwrap();
        assert_eq!(spec, gantry_policy::default_spec(), "{method} {path}");
        for r in spec
            .admission
            .iter()
            .chain(&spec.priority)
            .chain([&spec.placement])
        {
            assert!(builtin.contains(r.plugin.as_str()), "{}", r.plugin);
        }
    }
}

#[test]
fn the_stream_sends_what_its_schema_documents() {
    let doc = document();
    let schema = &doc["paths"]["/v1/stream"]["get"]["responses"]["200"]["content"]["text/event-stream"]
        ["schema"];
    assert_eq!(schema, &crate::api::live::event_schema());
    // One event as a client parses it: `field: value` lines up to a blank line.
    let frame = crate::api::live::event(3, 42, &["jobs", "faults"]);
    let text = std::str::from_utf8(&frame).unwrap();
    assert!(text.ends_with("\n\n"));
    let fields: std::collections::BTreeMap<&str, &str> = text
        .trim_end()
        .lines()
        .map(|l| l.split_once(": ").unwrap())
        .collect();
    let documented: BTreeSet<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(fields.keys().copied().collect::<BTreeSet<_>>(), documented);
    assert_eq!(schema["properties"]["event"]["enum"][0], fields["event"]);
    assert_eq!(fields["id"], "3");
    // The pattern spells the data out key by key: this exact text is what it matches.
    assert_eq!(fields["data"], r#"{"cycle":42,"parts":["jobs","faults"]}"#);
    let pattern = schema["properties"]["data"]["pattern"].as_str().unwrap();
    for piece in [
        r#"^\{"cycle":[0-9]+,"parts":\["#,
        r#"(jobs|nodes|policy|faults)"#,
        r"\]\}$",
    ] {
        assert!(pattern.contains(piece), "{pattern} lacks {piece}");
    }
}
