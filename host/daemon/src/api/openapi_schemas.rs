//! The schemas of the OpenAPI document (`components.schemas`): the error body, the job
//! spec with the limits `JobSpec::validate` enforces, the job record, the pipeline spec
//! and the views the API returns.
//!
//! Kept by hand next to `crate::model` and `crate::policy`: a new field there needs a line
//! here (the e2e and schemathesis runs check responses against these schemas).

use crate::model::{
    MAX_ARG_LEN, MAX_ARG_STRLEN, MAX_ARGS, MAX_PATH, MAX_REQUEUES, MAX_SCRIPT, MAX_STRING,
    MAX_TASKS, MAX_TIME_LIMIT_S,
};
use serde_json::{Value, json};

/// A `$ref` to a schema of this document.
pub fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn int(min: i64, max: i64) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max})
}

fn string(max: usize) -> Value {
    json!({"type": "string", "maxLength": max})
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
        "schemas": {
            "Error": error(),
            "JobSpec": job_spec(),
            "TaskSpec": task_spec(),
            "JobRecord": job_record(),
            "TaskRecord": task_record(),
            "PluginRef": plugin_ref(),
            "PipelineSpec": pipeline_spec(),
            "ReplayRequest": replay_request(),
            "Node": node(),
            "AccountingReport": super::accounting::report_schema(),
            "DrainRequest": {
                "type": "object", "additionalProperties": false, "required": ["reason"],
                "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": crate::scheduler::nodes::MAX_REASON, "description": "why (shown with the node and in waiting jobs' reasons)"}},
            },
            "SignalRequest": {
                "type": "object", "additionalProperties": false, "required": ["signal"],
                "properties": {"signal": {"type": "string", "description": "INT, TERM, USR1, USR2, HUP, QUIT, CONT, URG, WINCH or ALRM"}},
            },
        }
    })
}

fn error() -> Value {
    json!({
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "description": "machine-readable, e.g. `invalid-field`, `too-large`, `forbidden`"},
                    "message": {"type": "string"},
                    "field": {"type": "string", "description": "the request field at fault: a JSON path such as `tasks[0].gpus`, or `body`, `id`, `query`, `authorization`, `content-type`, `host`, `origin`"},
                },
            }
        },
    })
}

fn job_spec() -> Value {
    let strings =
        json!({"type": "object", "additionalProperties": string(MAX_STRING), "maxProperties": 64});
    json!({
        "type": "object",
        "additionalProperties": false,
        "description": "Exactly one of `argv` or `script`. The whole body is at most 1 MiB; argv and env together at most 1 MiB (each entry with its NUL, `NAME=value` at most 131072 bytes), an array's spec times its members at most `limits.max_submission_bytes`; a user's `tier` at most its queue's `limits.max_user_tier`.",
        "properties": {
            "name": string(MAX_STRING),
            "argv": {"type": "array", "items": string(MAX_ARG_LEN), "maxItems": MAX_ARGS},
            "script": {"type": "string", "nullable": true, "maxLength": MAX_SCRIPT},
            "env": {"type": "object", "additionalProperties": string(MAX_ARG_STRLEN - 3), "maxProperties": 256},
            "workdir": {"type": "string", "nullable": true, "minLength": 1, "maxLength": MAX_PATH},
            "tasks": {"type": "array", "items": schema_ref("TaskSpec"), "minItems": 1, "maxItems": 64},
            "time_limit_s": int(0, MAX_TIME_LIMIT_S as i64),
            "user": string(MAX_STRING),
            "account": string(MAX_STRING),
            "queue": {"type": "string", "minLength": 1, "maxLength": MAX_STRING},
            "tier": int(i64::from(i32::MIN), i64::from(i32::MAX)),
            "labels": strings,
            "kind": {"type": "string", "enum": ["batch", "interactive", "service"]},
            "preemptible": {"type": "boolean"},
            "requeue": {"type": "boolean"},
            "max_requeues": {"type": "integer", "nullable": true, "minimum": 0, "maximum": MAX_REQUEUES},
            "array": array_schema(),
            "dependencies": dependencies_schema(),
            "signal": signal_schema(),
            "service": service_schema(),
        },
    })
}

fn array_schema() -> Value {
    json!({
        "type": "object", "nullable": true, "additionalProperties": false,
        "description": "one job per index (`gantry submit --array 0-199%8`); at most `max_running` run at once",
        "required": ["indices"],
        "properties": {
            "indices": {"type": "array", "items": int(0, i64::from(u32::MAX)), "minItems": 1, "maxItems": 10_000},
            "max_running": {"type": "integer", "nullable": true, "minimum": 1},
        },
    })
}

fn dependencies_schema() -> Value {
    json!({"type": "array", "maxItems": 64, "items": {
        "type": "object", "additionalProperties": false, "required": ["kind", "job"],
        "properties": {
            "kind": {"type": "string", "enum": ["afterok", "afterany", "afternotok"]},
            "job": {"type": "integer", "minimum": 0, "description": "a job id, or an array id (all its members)"},
        },
    }})
}

fn signal_schema() -> Value {
    json!({
        "type": "object", "nullable": true, "additionalProperties": false, "required": ["signal"],
        "description": "sent `before_s` ahead of the time limit, and first on eviction",
        "properties": {"signal": string(16), "before_s": int(0, 86_400)},
    })
}

fn service_schema() -> Value {
    json!({
        "type": "object", "nullable": true, "additionalProperties": false,
        "description": "for `kind: service`: port (0: a free one, in PORT), health check, restart back-off",
        "properties": {
            "port": int(0, 65_535),
            "max_backoff_s": int(0, 3600),
            "health": {
                "type": "object", "nullable": true, "additionalProperties": false,
                "properties": {
                    "http_path": {"type": "string", "nullable": true, "maxLength": 1024},
                    "command": {"type": "array", "items": string(MAX_ARG_LEN), "maxItems": MAX_ARGS},
                    "interval_s": int(1, 3600),
                    "failures": int(1, 100),
                    "initial_delay_s": int(0, i64::from(u32::MAX)),
                },
            },
        },
    })
}

fn task_spec() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "description": "At most 1024 tasks over all groups; `gpus` or `gpu_milli`, not both.",
        "properties": {
            "count": int(1, i64::from(MAX_TASKS)),
            "gpus": int(0, 64),
            "gpu_milli": int(0, 999),
            "cpu_milli": int(1, 1_024_000),
            "memory_mib": int(1, 16 << 20),
            "gpu_models": {"type": "array", "items": string(MAX_STRING), "maxItems": 16},
        },
    })
}

fn job_record() -> Value {
    let nullable_int = json!({"type": "integer", "nullable": true});
    json!({
        "type": "object",
        "required": ["id", "spec", "state", "submit_ms", "tasks", "tier", "requeues"],
        "properties": {
            "id": {"type": "integer", "minimum": 0},
            "spec": schema_ref("JobSpec"),
            "state": {"type": "string", "enum": ["pending", "running", "succeeded", "failed", "cancelled", "timed_out", "preempted"]},
            "submit_ms": {"type": "integer", "minimum": 0},
            "start_ms": nullable_int,
            "end_ms": nullable_int,
            "tasks": {"type": "array", "items": schema_ref("TaskRecord")},
            "exit_code": nullable_int,
            "reason": {"type": "object", "nullable": true},
            "tier": {"type": "integer"},
            "score": {"type": "number", "nullable": true},
            "stopping": {"description": "why a stop is under way (`cancel`, `time_limit`, `gang_failed` or `{\"evicted\": {\"for_job\": id}}`), or null"},
            "requeues": {"type": "integer", "minimum": 0},
            "array": {"type": "object", "nullable": true, "description": "`{array_id, index, max_running}` of an array member"},
            "end_reason": {"type": "string", "nullable": true, "description": "`completed`, `exit-code`, `out-of-memory`, `cancelled`, `time-limit`, `preempted`, `launch-failed`, `lost`, `dependency-never-satisfied`"},
            "restarts": {"type": "integer", "minimum": 0},
            "restart_at_ms": nullable_int,
            "service_port": nullable_int,
            "health": {"type": "object", "nullable": true, "description": "a service's `{state: starting|healthy|unhealthy|unchecked, last_error, checked_ms, failures, last_exit, backoff_s}`"},
            "warned": {"type": "boolean"},
            "rendezvous_port": nullable_int,
            "array_job_ids": {"type": "array", "items": {"type": "integer"}, "description": "on submit of an array: every member's id"},
        },
    })
}

fn task_record() -> Value {
    json!({
        "type": "object",
        "properties": {
            "node": {"type": "string"},
            "gpus": {"type": "array", "items": {
                "type": "object",
                "properties": {"index": {"type": "integer"}, "milli": {"type": "integer"}},
            }},
            "cpu_milli": {"type": "integer"},
            "memory_mib": {"type": "integer"},
            "pid": {"type": "integer", "nullable": true},
            "exit": {"description": "how the task ended, or null"},
        },
    })
}

fn plugin_ref() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["plugin"],
        "properties": {
            "plugin": {"type": "string", "description": "a registered plugin name or a component sha256"},
            "config": {"description": "JSON passed to the plugin's `configure` (default `{}`)"},
            "deadline_ms": {"type": "integer", "nullable": true, "minimum": 0},
            "memory_mib": {"type": "integer", "nullable": true, "minimum": 0},
        },
    })
}

fn pipeline_spec() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["placement"],
        "properties": {
            "admission": {"type": "array", "items": schema_ref("PluginRef")},
            "priority": {"type": "array", "items": schema_ref("PluginRef")},
            "placement": schema_ref("PluginRef"),
            "preemption": schema_ref("PluginRef"),
        },
    })
}

fn replay_request() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["pipeline"],
        "properties": {
            "pipeline": schema_ref("PipelineSpec"),
            "since_s": {"type": "integer", "minimum": 0, "description": "default 3600"},
        },
    })
}

fn node() -> Value {
    let opt_string = || json!({"type": "string", "nullable": true});
    let mut node = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "state": {"type": "string", "enum": ["up", "down", "awaiting", "draining", "drained"], "description": "down: its agent missed its heartbeats (see down_reason); awaiting: known from before a controller restart, not heard from since; draining: drained with jobs still running; drained: drained and empty"},
            "drain": {"type": "object", "nullable": true, "properties": {
                "reason": {"type": "string"}, "by": {"type": "string"}, "since_ms": {"type": "integer"},
            }},
            "gpu_source": {"type": "string", "enum": ["nvml", "config"]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "cpu_milli": {"type": "integer"},
            "cpu_milli_allocated": {"type": "integer"},
            "memory_mib": {"type": "integer"},
            "memory_mib_allocated": {"type": "integer"},
            "gpus": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "model": {"type": "string"},
                    "memory_mib": {"type": "integer"},
                    "healthy": {"type": "boolean"},
                    "health": {"type": "object", "nullable": true, "description": "why the GPU takes no new tasks, and since when", "properties": {
                        "reason": {"type": "string"}, "since_ms": {"type": "integer"},
                    }},
                    "uuid": opt_string(),
                    "pci_bus_id": opt_string(),
                    "nvlink_peers": {"type": "array", "items": {"type": "integer"}},
                    "mig_enabled": {"type": "boolean"},
                    "mig_devices": {"type": "array", "description": "listed, not scheduled separately", "items": {
                        "type": "object",
                        "properties": {
                            "parent_index": {"type": "integer"}, "uuid": {"type": "string"},
                            "profile": {"type": "string"}, "name": {"type": "string"},
                            "memory_mib": {"type": "integer"},
                        },
                    }},
                    "allocated_milli": {"type": "integer", "minimum": 0, "maximum": 1000},
                    "jobs": {"type": "array"},
                },
            }},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    });
    // Multi-node: liveness and how the node is reached (one macro call would be too deep).
    let cluster = json!({
        "down_reason": opt_string(),
        "down_since_ms": {"type": "integer", "nullable": true},
        "agent": {"type": "string", "description": "\"local\" (the controller's own node) or the agent's URL"},
        "addr": {"type": "string", "description": "the node's address for other nodes' tasks (MASTER_ADDR)"},
        "last_heartbeat_ms": {"type": "integer", "nullable": true},
        "load": {"type": "object", "nullable": true, "properties": {
            "load_1m": {"type": "number"}, "memory_available_mib": {"type": "integer"},
        }},
    });
    if let (Some(props), Some(more)) = (node["properties"].as_object_mut(), cluster.as_object()) {
        props.extend(more.clone());
    }
    node
}
