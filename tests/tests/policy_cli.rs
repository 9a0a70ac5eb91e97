//! Issue 27, item 5: the policy commands as a person reads them, through the real CLI
//! against a real daemon: `gantry policy show`, `set`, `history`, `rollback`, `shadow`,
//! `gantry plugin list` and `gantry replay` print tables and sentences; `--json` prints the
//! daemon's answer for scripts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, gantry_bin};
use serde_json::Value;
use std::process::Command;

fn gantry(d: &Daemon, args: &[&str]) -> String {
    let out = Command::new(gantry_bin())
        .args(["--server", d.url()])
        .args(args)
        .env("HOME", "/nonexistent")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gantry {args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn policy_commands_print_tables_and_json_for_scripts() {
    let d = Daemon::start(2);
    let candidate = d.out_dir().join("candidate.json");
    std::fs::write(
        &candidate,
        r#"{"priority": [{"plugin": "fifo"}], "placement": {"plugin": "best-fit"}, "preemption": {"plugin": "priority-preempt"}}"#,
    )
    .unwrap();
    let candidate = candidate.to_str().unwrap();

    let shown = gantry(&d, &["policy", "show"]);
    let lines: Vec<&str> = shown.lines().collect();
    assert!(
        lines[0].starts_with("pipeline version 1 (default), active since "),
        "{shown}"
    );
    assert!(
        lines[1].starts_with("STAGE") && lines[1].contains("PLUGIN"),
        "{shown}"
    );
    assert!(
        lines[3].starts_with("placement") && lines[3].contains("first-fit"),
        "{shown}"
    );
    let json: Value = serde_json::from_str(&gantry(&d, &["policy", "show", "--json"])).unwrap();
    assert_eq!(json["active"]["version"], 1, "{json}");

    let set = gantry(&d, &["policy", "set", candidate]);
    assert!(
        set.starts_with("pipeline version 2 (set)") && set.contains("best-fit"),
        "{set}"
    );
    assert!(set.contains("swapped in "), "{set}");
    let history = gantry(&d, &["policy", "history"]);
    let rows: Vec<&str> = history.lines().collect();
    assert_eq!(rows.len(), 3, "{history}");
    assert!(
        rows[2].starts_with("2 ") && rows[2].contains("placement=best-fit@"),
        "{history}"
    );
    let rolled = gantry(&d, &["policy", "rollback"]);
    assert!(
        rolled.starts_with("pipeline version 3 (rollback)"),
        "{rolled}"
    );

    let plugins = gantry(&d, &["plugin", "list"]);
    assert!(plugins.starts_with("NAME"), "{plugins}");
    assert!(
        plugins
            .lines()
            .any(|l| l.starts_with("fifo ") && l.contains("priority")),
        "{plugins}"
    );
    let json: Value = serde_json::from_str(&gantry(&d, &["plugin", "list", "--json"])).unwrap();
    assert!(
        json.as_array().unwrap().iter().any(|p| p["name"] == "fifo"),
        "{json}"
    );

    let shadow = gantry(&d, &["policy", "shadow", candidate]);
    assert!(
        shadow.starts_with("shadow pipeline, running since "),
        "{shadow}"
    );
    assert!(
        shadow.contains("no job was decided differently"),
        "{shadow}"
    );
    assert_eq!(
        gantry(&d, &["policy", "shadow", "--clear"]),
        "shadow pipeline stopped\n"
    );

    let replay = gantry(&d, &["replay", "--since", "1h", "--pipeline", candidate]);
    assert!(
        replay.starts_with("replayed ") && replay.contains(" cycles, "),
        "{replay}"
    );
    let json: Value = serde_json::from_str(&gantry(
        &d,
        &["replay", "--since", "1h", "--pipeline", candidate, "--json"],
    ))
    .unwrap();
    assert!(json["cycles"].is_u64(), "{json}");
}
