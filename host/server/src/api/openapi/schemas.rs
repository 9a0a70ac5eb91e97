//! The schemas of the OpenAPI document (`components.schemas`), generated from the types
//! themselves with `utoipa::ToSchema`: the wire types of `gantry-api` (its feature `openapi`,
//! with `JobKind` and `ReasonCode` from `gantry-contract`'s) and the daemon's request bodies
//! (`PipelineSpec`, `ReplayRequest`, `DrainRequest`, `SignalRequest`, `JobUpdate`). Doc comments become
//! descriptions; serde's attributes (renames, defaults, `deny_unknown_fields`, `flatten`)
//! decide names, `required` and `additionalProperties`; limits are `#[schema(...)]` on the
//! fields. A field added to a type appears here without an edit.
//!
//! utoipa writes OpenAPI 3.1 schemas; the document is 3.0.3, so [`to_openapi_3_0`] rewrites
//! the 3.1 forms utoipa uses into 3.0's `nullable`. What the validation of a body checks and
//! an attribute cannot say (the items of a list, the values of a map, rules between fields)
//! is added afterwards by [`refinements`], each entry mirroring one check of the server.
//! Owns the list of root types, that rewrite and the refinements; the operations and their
//! references are `openapi.rs`'s.

use super::super::attach::SignalBody;
use super::super::job_control::JobUpdateBody;
use super::super::job_input::JobInputBody;
use super::super::nodes::DrainRequest;
use super::super::policy::ReplayRequest;
use gantry_api::accounting::AccountingReport;
use gantry_api::cluster_join::{JoinTokenCreated, JoinTokenRequest, JoinTokenView};
use gantry_api::error::ErrorBody;
use gantry_api::model::{
    JobRecord, JobSpec, MAX_ARG_LEN, MAX_STRING, RollbackRequest, ScaleRequest, ServiceView,
    UpdateRequest,
};
use gantry_api::views::{NodeView, Submitted, WhatIfRequest};
use gantry_policy::PipelineSpec;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

/// A `$ref` to a schema of this document.
pub fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// `components`: schemas and the bearer-token security scheme.
pub fn components() -> Value {
    json!({
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API token from `gantry token create`; not needed while the daemon has no tokens configured.",
            }
        },
        "schemas": schemas(),
    })
}

/// (name, schema) of a type and of every type it refers to.
type Collected = Vec<(String, RefOr<Schema>)>;

fn add<T: ToSchema>(out: &mut Collected) {
    out.push((T::name().into_owned(), T::schema()));
    T::schemas(out);
}

/// Every schema the operations refer to (`Error`, `JobSpec`, `Submitted`, `WhatIfRequest`,
/// `StartForecast`, `JobRecord`,
/// `Node`, `AccountingReport`, `PipelineSpec`, `ReplayRequest`, `DrainRequest`,
/// `SignalRequest`, `ServiceView`, `ScaleRequest`, `UpdateRequest`, `RollbackRequest`, the join
/// tokens') and the schemas they refer to, by name.
pub fn schemas() -> Map<String, Value> {
    let mut all = Collected::new();
    add::<ErrorBody>(&mut all);
    add::<JobSpec>(&mut all);
    add::<JoinTokenRequest>(&mut all);
    add::<JoinTokenCreated>(&mut all);
    add::<JoinTokenView>(&mut all);
    add::<Submitted>(&mut all);
    add::<WhatIfRequest>(&mut all);
    add::<gantry_api::model::StartForecast>(&mut all);
    add::<JobRecord>(&mut all);
    add::<NodeView>(&mut all);
    add::<AccountingReport>(&mut all);
    add::<PipelineSpec>(&mut all);
    add::<ReplayRequest>(&mut all);
    add::<DrainRequest>(&mut all);
    add::<SignalBody>(&mut all);
    add::<JobUpdateBody>(&mut all);
    add::<JobInputBody>(&mut all);
    add::<ServiceView>(&mut all);
    add::<ScaleRequest>(&mut all);
    add::<UpdateRequest>(&mut all);
    add::<RollbackRequest>(&mut all);
    let mut out: Map<String, Value> = all
        .into_iter()
        .map(|(name, schema)| {
            // Serialising utoipa's schema types cannot fail (string keys only); should it,
            // the document says so rather than leave a dangling `$ref`.
            let value = serde_json::to_value(&schema)
                .unwrap_or_else(|e| json!({"description": format!("not serialisable: {e}")}));
            (name, to_openapi_3_0(value))
        })
        .collect();
    for (name, pointer, extra) in refinements() {
        // A refinement of a schema or field that is gone is a bug the tests catch
        // (`every_refinement_lands_where_it_says`); the document leaves it out rather than
        // invent the place.
        if let Some(Value::Object(target)) = out.get_mut(name).and_then(|s| s.pointer_mut(pointer))
            && let Value::Object(extra) = extra
        {
            target.extend(extra);
        }
    }
    out
}

/// No control characters (`char::is_control`: U+0000..U+001F, U+007F..U+009F), as
/// `check_string` in `gantry-api`'s model refuses them; also in its `#[schema]` attributes.
pub const NO_CONTROL: &str = r"^[^\x00-\x1f\x7f-\x9f]*$";
/// No NUL (`execve` ends a string there).
const NO_NUL: &str = r"^[^\x00]*$";
/// Standard base64 with its padding (`POST /v1/jobs/{id}/input`'s data).
const BASE64: &str = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$";
/// The signals a job may ask for (`WarnSignal::number`), by name or by number (Linux's); the
/// server also takes lower case, a `SIG` prefix and blanks around, which this leaves out.
pub const SIGNAL: &str =
    "^(HUP|INT|QUIT|USR1|USR2|TERM|CONT|URG|WINCH|ALRM|1|2|3|10|12|14|15|18|23|28)$";

/// `nullable` with only `null` allowed: "absent or null" in a rule between fields.
fn null_only() -> Value {
    json!({"nullable": true, "enum": [null]})
}

/// What the server's validation checks that the attributes on the fields cannot say, as
/// (schema, JSON pointer within it, keys merged there); 3.0 forms (`nullable`, no
/// `propertyNames`). Names of map keys (`env`'s without `=` or NUL, `labels`' without control
/// characters) and byte lengths (`maxLength` counts characters) stay in the descriptions.
pub fn refinements() -> Vec<(&'static str, &'static str, Value)> {
    let argument = json!({"type": "string", "maxLength": MAX_ARG_LEN, "pattern": NO_NUL});
    let text = json!({"type": "string", "maxLength": MAX_STRING, "pattern": NO_CONTROL});
    vec![
        // `JobSpec::validate`: a non-empty argv or a script (not both, which the schema does
        // not say: it is also a `JobRecord`'s, and `api/redact.rs` shows another user's script
        // job with both hidden); service settings only for a service; `exec_size::check`: no
        // NUL in an argument or a value.
        (
            "JobSpec",
            "",
            json!({"allOf": [
                {"anyOf": [
                    {"required": ["argv"], "properties": {"argv": {"minItems": 1}}},
                    {"required": ["script"], "properties": {"script": {"type": "string"}}},
                ]},
                {"anyOf": [
                    {"required": ["kind"], "properties": {"kind": {"enum": ["service"]}}},
                    {"properties": {"service": null_only()}},
                ]},
                {"anyOf": [
                    {"required": ["kind"], "properties": {"kind": {"enum": ["interactive"]}}},
                    {"properties": {"stdin": {"enum": [false]}, "tty": null_only()}},
                ]},
            ]}),
        ),
        ("JobSpec", "/properties/argv/items", argument.clone()),
        ("JobSpec", "/properties/env", json!({"maxProperties": 256})),
        (
            "JobSpec",
            "/properties/env/additionalProperties",
            json!({"type": "string", "pattern": NO_NUL}),
        ),
        (
            "JobSpec",
            "/properties/labels",
            json!({"maxProperties": 64}),
        ),
        (
            "JobSpec",
            "/properties/labels/additionalProperties",
            text.clone(),
        ),
        // `validate_tasks`: whole GPUs or a fraction, not both; models only with GPUs.
        (
            "TaskSpec",
            "",
            json!({"allOf": [
                {"anyOf": [
                    {"properties": {"gpus": {"maximum": 0}}},
                    {"properties": {"gpu_milli": {"maximum": 0}}},
                ]},
                {"anyOf": [
                    {"properties": {"gpu_models": {"maxItems": 0}}},
                    {"required": ["gpus"], "properties": {"gpus": {"minimum": 1}}},
                    {"required": ["gpu_milli"], "properties": {"gpu_milli": {"minimum": 1}}},
                ]},
            ]}),
        ),
        ("TaskSpec", "/properties/gpu_models/items", text),
        // `job_options::validate`: a health check is an HTTP path or a command, not both.
        (
            "HealthCheck",
            "",
            json!({"anyOf": [
                {"required": ["http_path"], "properties": {"http_path": {"type": "string"}, "command": {"maxItems": 0}}},
                {"required": ["command"], "properties": {"command": {"minItems": 1}, "http_path": null_only()}},
            ]}),
        ),
        ("HealthCheck", "/properties/command/items", argument),
        // `WarnSignal::number`, for a job's warning signal and for `POST /v1/jobs/{id}/signal`.
        (
            "WarnSignal",
            "/properties/signal",
            json!({"pattern": SIGNAL}),
        ),
        (
            "SignalRequest",
            "/properties/signal",
            json!({"pattern": SIGNAL}),
        ),
        // `job_input`: standard base64 with its padding.
        ("JobInput", "/properties/data", json!({"pattern": BASE64})),
    ]
}

/// Rewrites utoipa's OpenAPI 3.1 forms into OpenAPI 3.0, bottom-up:
///
/// - `"type": [T, "null"]` becomes `"type": T, "nullable": true`;
/// - a `oneOf` (or `anyOf`) with `{"type": "null"}` (an `Option` of a referenced or inlined
///   type) loses it and says `"nullable": true`;
/// - a `oneOf` or `allOf` of one inline schema is merged into its parent (the parent's keys,
///   such as the field's description, win); of one `$ref`, it stays `"allOf": [{"$ref"}]`;
/// - 3.0 ignores the siblings of a `$ref`: they move next to an `allOf` of it (or are dropped
///   from the members of a longer `allOf`);
/// - `propertyNames` (the keys of a map, always strings here) is dropped.
pub fn to_openapi_3_0(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(to_openapi_3_0).collect()),
        Value::Object(map) => {
            let children = map
                .into_iter()
                .map(|(k, v)| (k, to_openapi_3_0(v)))
                .collect();
            Value::Object(object_to_3_0(children))
        }
        other => other,
    }
}

/// One schema object whose children are already rewritten (see [`to_openapi_3_0`]).
fn object_to_3_0(mut map: Map<String, Value>) -> Map<String, Value> {
    map.remove("propertyNames");
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(alternatives)) = map.remove(key) else {
            continue;
        };
        let is_null = |v: &Value| v.get("type").is_some_and(|t| t == "null");
        if alternatives.iter().any(is_null) {
            map.insert("nullable".into(), Value::Bool(true));
        }
        let rest: Vec<Value> = alternatives.into_iter().filter(|a| !is_null(a)).collect();
        let key = if rest.len() == 1 { "allOf" } else { key };
        map.insert(key.into(), Value::Array(rest));
    }
    if let Some(Value::Array(mut members)) = map.remove("allOf") {
        if let [Value::Object(only)] = members.as_mut_slice() {
            let reference = only.remove("$ref");
            for (k, v) in std::mem::take(only) {
                map.entry(k).or_insert(v);
            }
            if let Some(reference) = reference {
                map.insert("allOf".into(), json!([{ "$ref": reference }]));
            }
        } else {
            for member in &mut members {
                if let Some(reference) = lone_ref(member) {
                    *member = json!({ "$ref": reference });
                }
            }
            map.insert("allOf".into(), Value::Array(members));
        }
    }
    if map.len() > 1
        && let Some(reference) = map.remove("$ref")
    {
        map.insert("allOf".into(), json!([{ "$ref": reference }]));
    }
    if let Some(Value::Array(types)) = map.get("type").cloned() {
        let mut rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if rest.len() < types.len() {
            map.insert("nullable".into(), Value::Bool(true));
        }
        match rest.len() {
            1 => map.insert("type".into(), rest.remove(0)),
            _ => map.remove("type"),
        };
    }
    map
}

/// The reference a schema stands for, annotations aside: `{"$ref"}` or `{"allOf": [{"$ref"}]}`.
fn lone_ref(schema: &Value) -> Option<Value> {
    if let Some(reference) = schema.get("$ref") {
        return Some(reference.clone());
    }
    match schema
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([only]) => only.get("$ref").cloned(),
        _ => None,
    }
}
