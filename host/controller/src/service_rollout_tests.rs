//! The owner's rules on made-up replicas: steady state, rolling updates within
//! `max_surge`/`max_unavailable`, and which replica goes first.

use super::*;
use gantry_api::model::{JobSpec, RolloutStrategy};

fn spec() -> JobSpec {
    serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap()
}

fn service(replicas: u32, revision: u32, surge: u32, unavailable: u32) -> ServiceRecord {
    ServiceRecord {
        id: 1,
        name: "web".into(),
        template: spec(),
        replicas,
        revision,
        made: 0,
        created_ms: 0,
        stopped: false,
        privileged: false,
        endpoint_port: None,
        last_error: None,
        strategy: RolloutStrategy {
            max_surge: surge,
            max_unavailable: unavailable,
            progress_deadline_s: 60,
        },
        autoscale: None,
        history: Vec::new(),
        rollout: Some(RolloutStatus {
            from: 1,
            to: revision,
            started_ms: 0,
            state: RolloutState::Progressing,
            ended_ms: None,
        }),
        last_revision: revision,
    }
}

fn replica(job: u64, revision: u32, ready: bool) -> Replica {
    Replica {
        job,
        running: true,
        revision,
        ready,
        stopping: false,
        node_gpus_in_use: 1,
    }
}

#[test]
fn steady_state_makes_missing_and_drains_pending_first() {
    let s = service(3, 1, 1, 0);
    let p = plan(&s, &[replica(1, 1, true)]);
    assert_eq!(p.submit, 2);
    assert!(p.drain.is_empty());
    let mut pending = replica(9, 1, false);
    pending.running = false;
    let s = service(1, 1, 1, 0);
    let p = plan(&s, &[replica(1, 1, true), replica(2, 1, true), pending]);
    assert_eq!(p.drain, vec![(9, false), (2, true)]);
}

#[test]
fn scale_down_frees_the_emptiest_node() {
    let s = service(1, 1, 1, 0);
    let mut busy = replica(1, 1, true);
    busy.node_gpus_in_use = 4;
    let quiet = replica(2, 1, true);
    let p = plan(&s, &[busy, quiet]);
    assert_eq!(p.drain, vec![(2, true)]);
}

#[test]
fn rolling_update_surges_then_drains_one_old_per_ready_new() {
    // 2 wanted, surge 1, unavailable 0: one new first, nothing old drained yet.
    let s = service(2, 2, 1, 0);
    let p = plan(&s, &[replica(1, 1, true), replica(2, 1, true)]);
    assert_eq!((p.submit, p.drain.len()), (1, 0));
    // The new one is not ready: no old one goes.
    let p = plan(
        &s,
        &[
            replica(1, 1, true),
            replica(2, 1, true),
            replica(3, 2, false),
        ],
    );
    assert_eq!((p.submit, p.drain.len()), (0, 0));
    // Ready: one old one goes (the newest old), no new one beyond the surge.
    let p = plan(
        &s,
        &[
            replica(1, 1, true),
            replica(2, 1, true),
            replica(3, 2, true),
        ],
    );
    assert_eq!(p.submit, 0);
    assert_eq!(p.drain, vec![(2, true)]);
    // Old replicas not ready go whatever the budget.
    let p = plan(&s, &[replica(1, 1, false), replica(3, 2, false)]);
    assert_eq!(p.drain, vec![(1, true)]);
    assert!(!p.complete);
}

#[test]
fn max_unavailable_lets_old_go_before_new_are_ready() {
    let s = service(2, 2, 0, 1);
    let p = plan(&s, &[replica(1, 1, true), replica(2, 1, true)]);
    assert_eq!(p.submit, 0);
    assert_eq!(p.drain.len(), 1);
}

#[test]
fn rollout_completes_when_every_new_replica_is_ready() {
    let s = service(2, 2, 1, 0);
    let p = plan(&s, &[replica(3, 2, true), replica(4, 2, true)]);
    assert!(p.complete);
    let p = plan(&s, &[replica(3, 2, true), replica(4, 2, false)]);
    assert!(!p.complete);
}

#[test]
fn an_update_keeps_the_current_revision_in_a_full_history() {
    let mut s = service(1, 1, 1, 0);
    s.rollout = None;
    s.history.push(Revision {
        revision: 1,
        template: spec(),
        created_ms: 0,
        change: "created".into(),
        rolled_back: None,
    });
    for r in 2..=14 {
        let mut t = spec();
        t.argv = vec![format!("v{r}")];
        start_rollout(&mut s, r, t, "argv".into());
    }
    assert_eq!(s.history.len(), HISTORY_KEPT);
    assert_eq!(s.revision, 14);
    assert_eq!(s.history.last().map(|h| h.revision), Some(14));
    let request = UpdateRequest {
        env: [("A".to_string(), Some("1".to_string()))].into(),
        ..UpdateRequest::default()
    };
    let (t, change) = updated_template(&s, &request);
    assert_eq!(change, "env A");
    assert_eq!(t.env.get("A").map(String::as_str), Some("1"));
    let (_, none) = updated_template(&s, &UpdateRequest::default());
    assert!(none.is_empty());
}
