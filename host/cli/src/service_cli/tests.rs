#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::service_print;
use clap::Parser;
use serde_json::json;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    service: ServiceArgs,
}

fn parse(argv: &[&str]) -> Result<ServiceAction, clap::Error> {
    Cli::try_parse_from(std::iter::once("service").chain(argv.iter().copied()))
        .map(|c| c.service.action)
}

fn update_args(argv: &[&str]) -> UpdateArgs {
    let mut all = vec!["update"];
    all.extend_from_slice(argv);
    match parse(&all).unwrap() {
        ServiceAction::Update(a) => *a,
        other => panic!("not an update: {other:?}"),
    }
}

fn record(extra: serde_json::Value) -> ServiceRecord {
    let mut r = json!({
        "id": 7, "name": "web", "template": {"argv": ["serve"], "user": "alice"},
        "replicas": 2, "revision": 3, "made": 4, "created_ms": 0, "stopped": false,
        "privileged": false, "endpoint_port": null,
    });
    r.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    serde_json::from_value(r).unwrap()
}

#[test]
fn update_sends_image_argv_and_env_changes() {
    let a = update_args(&[
        "7",
        "--image",
        "vllm:0.6",
        "--argv",
        "python serve.py --name 'my model'",
        "--env",
        "A=1",
        "--unset-env",
        "B",
    ]);
    let r = update_request(&a, None).unwrap();
    assert_eq!(r.image.as_deref(), Some("vllm:0.6"));
    assert_eq!(
        r.argv.unwrap(),
        ["python", "serve.py", "--name", "my model"]
    );
    assert_eq!(r.env["A"].as_deref(), Some("1"));
    assert_eq!(r.env["B"], None);
    assert!(r.rollout.is_none() && r.autoscale.is_none() && !r.no_autoscale);
}

#[test]
fn update_takes_the_command_after_dashes_and_an_empty_image() {
    let a = update_args(&["7", "--image", "", "--", "serve", "--port", "8000"]);
    let r = update_request(&a, None).unwrap();
    assert_eq!(r.image.as_deref(), Some(""));
    assert_eq!(r.argv.unwrap(), ["serve", "--port", "8000"]);
    assert!(parse(&["update", "7", "--argv", "x", "--", "y"]).is_err());
}

#[test]
fn update_changes_only_the_strategy_flags_given() {
    let current = record(json!({
        "strategy": {"max_surge": 2, "max_unavailable": 1, "progress_deadline_s": 600}
    }));
    let r = update_request(&update_args(&["7", "--deadline", "120"]), Some(&current)).unwrap();
    let s = r.rollout.unwrap();
    assert_eq!(
        (s.max_surge, s.max_unavailable, s.progress_deadline_s),
        (2, 1, 120)
    );
}

#[test]
fn update_builds_autoscaling_from_scratch_or_from_the_current_one() {
    let bare = record(json!({}));
    let partial = update_args(&["7", "--metric", "m"]);
    let err = update_request(&partial, Some(&bare)).unwrap_err();
    assert!(err.to_string().contains("--autoscale-min"), "{err}");

    let full = update_args(&[
        "7",
        "--autoscale-min",
        "1",
        "--autoscale-max",
        "8",
        "--metric",
        "vllm:num_requests_waiting",
        "--target",
        "5",
    ]);
    let a = update_request(&full, Some(&bare))
        .unwrap()
        .autoscale
        .unwrap();
    assert_eq!((a.min_replicas, a.max_replicas, a.target), (1, 8, 5.0));
    assert_eq!((a.path.as_str(), a.period_s), ("/metrics", 15));

    let scaled = record(json!({"autoscale": {
        "min_replicas": 0, "max_replicas": 4, "metric": "m", "target": 2.0,
        "scale_to_zero_after_s": 600,
    }}));
    let change = update_args(&["7", "--autoscale-max", "6", "--period", "30"]);
    let a = update_request(&change, Some(&scaled))
        .unwrap()
        .autoscale
        .unwrap();
    assert_eq!((a.min_replicas, a.max_replicas, a.period_s), (0, 6, 30));
    assert_eq!(a.scale_to_zero_after_s, Some(600));
    // A minimum above 0 cannot scale to zero: the setting goes unless given.
    let up = update_args(&["7", "--autoscale-min", "1"]);
    let a = update_request(&up, Some(&scaled))
        .unwrap()
        .autoscale
        .unwrap();
    assert_eq!((a.min_replicas, a.scale_to_zero_after_s), (1, None));
}

#[test]
fn update_rejects_bad_flags() {
    assert!(parse(&["update", "7", "--no-autoscale", "--metric", "m"]).is_err());
    assert!(parse(&["update", "7", "--target", "0"]).is_err());
    assert!(parse(&["update", "7", "--target", "nan"]).is_err());
    let both = update_args(&["7", "--env", "A=1", "--unset-env", "A"]);
    assert!(update_request(&both, None).is_err());
    let bad = update_args(&["7", "--env", "A"]);
    assert!(update_request(&bad, None).is_err());
    let none = update_args(&["7", "--no-autoscale"]);
    assert!(update_request(&none, None).unwrap().no_autoscale);
    assert_eq!(
        update_request(&update_args(&["7"]), None).unwrap(),
        UpdateRequest::default()
    );
}

#[test]
fn rollback_and_history_parse() {
    assert!(matches!(
        parse(&["rollback", "7", "--to", "2"]).unwrap(),
        ServiceAction::Rollback { id: 7, to: Some(2) }
    ));
    assert!(matches!(
        parse(&["rollback", "7"]).unwrap(),
        ServiceAction::Rollback { id: 7, to: None }
    ));
    assert!(matches!(
        parse(&["history", "7", "--json"]).unwrap(),
        ServiceAction::History { id: 7 }
    ));
}

#[test]
fn create_keeps_rollout_and_autoscale_from_yaml_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("web.yaml");
    std::fs::write(
        &yaml,
        "argv: [serve]\nkind: service\nservice:\n  replicas: 2\n  rollout:\n    max_surge: 2\n    \
         max_unavailable: 1\n  autoscale:\n    min_replicas: 1\n    max_replicas: 4\n    \
         metric: m\n    target: 2.5\n    period_s: 5\n",
    )
    .unwrap();
    let from_yaml = read_spec(&yaml).unwrap();
    let sent = serde_json::to_value(&from_yaml).unwrap();
    assert_eq!(sent["service"]["rollout"]["max_surge"], 2);
    assert_eq!(sent["service"]["rollout"]["max_unavailable"], 1);
    assert_eq!(sent["service"]["autoscale"]["target"], 2.5);
    assert_eq!(sent["service"]["autoscale"]["period_s"], 5);

    let json_file = dir.path().join("web.json");
    std::fs::write(&json_file, serde_json::to_string(&sent).unwrap()).unwrap();
    assert_eq!(read_spec(&json_file).unwrap(), from_yaml);
}

fn view(
    record: ServiceRecord,
    replicas: serde_json::Value,
    samples: serde_json::Value,
) -> ServiceView {
    ServiceView {
        service: record,
        replica_jobs: serde_json::from_value(replicas).unwrap(),
        scale_samples: serde_json::from_value(samples).unwrap(),
        endpoint_problem: None,
    }
}

fn replica(job: u64, revision: u32, draining: bool) -> serde_json::Value {
    json!({"job": job, "state": "running", "node": "n1", "port": 8000, "health": "healthy",
           "restarts": 0, "reason": null, "revision": revision, "draining": draining})
}

#[test]
fn show_and_ls_give_revisions_draining_rollout_and_autoscaling() {
    let r = record(json!({
        "rollout": {"from": 2, "to": 3, "started_ms": 0, "state": "progressing"},
        "autoscale": {"min_replicas": 1, "max_replicas": 4, "metric": "q", "target": 2.0},
    }));
    let v = view(
        r,
        json!([replica(11, 2, true), replica(12, 3, false)]),
        json!([{"t_ms": 0, "value": 1.0, "ready": 1, "replicas": 1},
               {"t_ms": 1, "value": 6.5, "ready": 2, "replicas": 4}]),
    );
    let text = service_print::detail_lines(&v).join("\n");
    assert!(text.contains("revision 3"), "{text}");
    assert!(
        text.contains("rollout: revision 2 -> 3 progressing"),
        "{text}"
    );
    assert!(
        text.contains("autoscale: 1..4 replicas on q, target 2 per replica"),
        "{text}"
    );
    assert!(
        text.contains("q = 6.5 over 2 ready replica(s), 4 wanted"),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    let old = lines.iter().find(|l| l.starts_with("11 ")).unwrap();
    assert!(old.contains("draining") && old.contains(" 2 "), "{old}");
    let new = lines.iter().find(|l| l.starts_with("12 ")).unwrap();
    assert!(new.contains("running") && new.contains(" 3 "), "{new}");

    let ls = service_print::list_lines(std::slice::from_ref(&v));
    assert!(ls[1].contains("1..4"), "{}", ls[1]);
    assert!(
        ls[1].contains("rolling out revision 2 -> 3, 1 draining"),
        "{}",
        ls[1]
    );
}

#[test]
fn history_marks_the_current_revision_and_rollbacks() {
    let template = json!({"argv": ["serve"]});
    let r = record(json!({
        "revision": 2,
        "history": [
            {"revision": 1, "template": template, "created_ms": 0, "change": ""},
            {"revision": 2, "template": template, "created_ms": 0, "change": "image=a"},
            {"revision": 3, "template": template, "created_ms": 0, "change": "argv",
             "rolled_back": "not healthy within 300 s"},
        ],
        "rollout": {"from": 2, "to": 3, "started_ms": 0, "state": "rolled-back", "ended_ms": 5},
    }));
    let lines = service_print::history_lines(&view(r, json!([]), json!([])));
    let text = lines.join("\n");
    assert!(lines[3].contains("image=a  (current)"), "{text}");
    assert!(
        lines[4].contains("argv  (rolled back: not healthy within 300 s)"),
        "{text}"
    );
    assert!(
        text.contains("last rollout: revision 2 -> 3 rolled back, started"),
        "{text}"
    );
}
