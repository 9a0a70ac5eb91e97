//! What a caller may see of other users' jobs. Operators and admins see everything; a
//! `user`-role caller (a token, a local account on the Unix socket) sees its own jobs whole;
//! an anonymous caller (TCP without a token, `auth.anonymous_role` below operator) sees the
//! anonymous jobs whole. Of everyone else's jobs they see only what the queue needs to be
//! understood: an **allow-list** of fields (name, user, account, queue, resources, state,
//! times, reasons, exit, health state). Everything else (`env`, `argv`, `script`,
//! `workdir`, labels, a service's health command, a health check's error text, ...) is
//! hidden. Both structs are rebuilt field by field without `..`, so a field added to
//! `JobSpec`, `JobRecord`, `TaskRecord` or `ServiceHealth` does not compile here until
//! someone decides whether others may see it (`docs/security.md`, attack U10).
//!
//! Owns: the redaction. Does not own who may act on a job (`crate::auth`).

use crate::auth::{ANONYMOUS_USER, Caller};
use gantry_api::model::{JobRecord, JobSpec, ServiceHealth, TaskRecord};
use gantry_config::auth::Role;

/// What stands in for a hidden `argv` or `script`.
const HIDDEN: &str = "(hidden: another user's job)";

/// Hides the private fields of `job` from `caller` unless it may see them.
pub(super) fn redact(caller: &Caller, job: &mut JobRecord) {
    let sees_whole = match caller {
        Caller::Token(id) => id.role >= Role::Operator || id.user == job.spec.user,
        Caller::Open(role) => {
            *role >= Role::Operator || (job.spec.anonymous && job.spec.user == ANONYMOUS_USER)
        }
    };
    if !sees_whole {
        *job = for_others(job);
    }
}

/// Hides the private fields of a replicated service's template (its replicas' job spec)
/// from `caller` as [`redact`] would those of one of its replicas.
pub(super) fn redact_service(caller: &Caller, service: &mut gantry_api::model::ServiceView) {
    let record = &mut service.service;
    let templates = std::iter::once(&mut record.template)
        .chain(record.history.iter_mut().map(|h| &mut h.template));
    for template in templates {
        let mut probe = JobRecord::new(0, template.clone(), 0);
        redact(caller, &mut probe);
        *template = probe.spec;
    }
}

/// [`redact`] over a list.
pub(super) fn redact_all(caller: &Caller, jobs: &mut [JobRecord]) {
    for job in jobs {
        redact(caller, job);
    }
}

/// The fields of `job` anyone who may list the queue may see.
fn for_others(job: &JobRecord) -> JobRecord {
    let JobRecord {
        id,
        spec,
        state,
        submit_ms,
        start_ms,
        end_ms,
        tasks,
        exit_code,
        reason,
        tier,
        score,
        stopping,
        requeues,
        array,
        end_reason,
        restarts,
        restart_at_ms,
        service_port,
        health,
        warned,
        rendezvous_port,
        held_by,
        held_role,
        cancelled_by,
        signal_due,
        start_forecast,
    } = job;
    JobRecord {
        id: *id,
        spec: spec_for_others(spec),
        state: *state,
        submit_ms: *submit_ms,
        start_ms: *start_ms,
        end_ms: *end_ms,
        tasks: tasks.iter().map(task_for_others).collect(),
        exit_code: *exit_code,
        reason: reason.clone(),
        tier: *tier,
        score: *score,
        stopping: stopping.clone(),
        requeues: *requeues,
        array: *array,
        end_reason: end_reason.clone(),
        restarts: *restarts,
        restart_at_ms: *restart_at_ms,
        service_port: *service_port,
        health: health.as_ref().map(health_for_others),
        warned: *warned,
        rendezvous_port: *rendezvous_port,
        held_by: held_by.clone(),
        held_role: *held_role,
        cancelled_by: cancelled_by.clone(),
        signal_due: *signal_due,
        start_forecast: start_forecast.clone(),
    }
}

fn spec_for_others(spec: &JobSpec) -> JobSpec {
    let JobSpec {
        name,
        argv: _,
        script,
        env: _,
        workdir: _,
        tasks,
        time_limit_s,
        user,
        anonymous,
        account,
        queue,
        tier,
        labels: _,
        kind,
        preemptible,
        requeue,
        max_requeues,
        array,
        dependencies,
        signal,
        service: _,
        hold,
        nodes,
        share_node_gpus,
        output: _,
        error: _,
        begin_ms,
        stdin,
        tty,
        image,
        mounts: _,
    } = spec;
    JobSpec {
        name: name.clone(),
        argv: vec![HIDDEN.to_owned()],
        script: script.as_ref().map(|_| HIDDEN.to_owned()),
        env: Default::default(),
        workdir: None,
        tasks: tasks.clone(),
        time_limit_s: *time_limit_s,
        user: user.clone(),
        anonymous: *anonymous,
        account: account.clone(),
        queue: queue.clone(),
        tier: *tier,
        labels: Default::default(),
        kind: *kind,
        preemptible: *preemptible,
        requeue: *requeue,
        max_requeues: *max_requeues,
        array: array.clone(),
        dependencies: dependencies.clone(),
        signal: signal.clone(),
        service: None,
        hold: *hold,
        nodes: *nodes,
        share_node_gpus: *share_node_gpus,
        output: None,
        error: None,
        begin_ms: *begin_ms,
        stdin: *stdin,
        tty: *tty,
        image: image.clone(),
        mounts: Vec::new(),
    }
}

fn task_for_others(task: &TaskRecord) -> TaskRecord {
    let TaskRecord {
        node,
        gpus,
        cpu_milli,
        memory_mib,
        pid: _,
        exit,
        started_ms,
        ended_ms,
        usage,
        gpu_usage: _,
    } = task;
    TaskRecord {
        node: node.clone(),
        gpus: gpus.clone(),
        cpu_milli: *cpu_milli,
        memory_mib: *memory_mib,
        pid: None,
        exit: *exit,
        started_ms: *started_ms,
        ended_ms: *ended_ms,
        usage: *usage,
        // How busy another user's GPUs are is theirs to see.
        gpu_usage: None,
    }
}

fn health_for_others(health: &ServiceHealth) -> ServiceHealth {
    let ServiceHealth {
        state,
        last_error: _,
        checked_ms,
        failures,
        last_exit: _,
        backoff_s,
    } = health;
    ServiceHealth {
        state: *state,
        last_error: None,
        checked_ms: *checked_ms,
        failures: *failures,
        last_exit: None,
        backoff_s: *backoff_s,
    }
}
