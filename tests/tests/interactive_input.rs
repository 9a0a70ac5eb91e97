//! `gantry run` as `srun --pty` (issue 27, item 6), with a real daemon and real processes:
//! the client's stdin reaches the job (every byte, then its end); a job with a terminal sees
//! one of the size it asked for, follows resizes, and gets Ctrl-C as SIGINT from its terminal;
//! a job on an agent gets its input through the agent; and input nobody may send is refused
//! naming why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use gantry_e2e::agents::Agent;
use gantry_e2e::{Daemon, WAIT, gantry_bin, tasks};
use serde_json::json;
use std::io::Write;
use std::process::{Command, Stdio};

const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";

fn gantry(d: &Daemon) -> Command {
    let mut cmd = Command::new(gantry_bin());
    cmd.arg("--server").arg(d.url()).env_remove("GANTRY_TOKEN");
    cmd
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The text of task 0's log of job `id`.
fn log(d: &Daemon, id: u64) -> String {
    d.get_text(&format!("/v1/jobs/{id}/logs")).1
}

#[test]
fn gantry_run_sends_every_byte_of_stdin_then_its_end() {
    let d = Daemon::start(1);
    // 2 MB of bytes that are not text, through the client, checked by the job.
    let blob: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let local = {
        let mut cksum = Command::new("cksum")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        cksum.stdin.take().unwrap().write_all(&blob).unwrap();
        String::from_utf8(cksum.wait_with_output().unwrap().stdout).unwrap()
    };
    let mut run = gantry(&d)
        .args(["run", "--", "sh", "-c", "cksum; echo after-the-end"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = run.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&blob));
    let out = run.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        stdout,
        format!("{local}after-the-end\n"),
        "the job read all of stdin, then its end: {stderr}"
    );
    let (_, job) = d.get("/v1/jobs/1");
    assert_eq!(job["spec"]["stdin"], true, "{job}");

    // `--no-stdin`: the job reads /dev/null, whatever the client's stdin holds.
    let out = gantry(&d)
        .args(["run", "--no-stdin", "--", "sh", "-c", "wc -c"])
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
}

#[test]
fn a_job_with_a_terminal_sees_its_size_follows_resizes_and_reads_what_is_typed() {
    let d = Daemon::start(1);
    let mut spec = d.shell_job(
        "tty",
        1,
        0,
        "stty size; [ -t 0 ] && [ -t 1 ] && echo is-a-terminal; read line; stty size; echo \"got:$line\"",
    );
    spec["kind"] = json!("interactive");
    spec["tty"] = json!({"rows": 30, "cols": 90});
    let id = d.submit(&spec);
    d.wait_state(id, "running");
    // The first size is printed before the resize is sent (else the job may see 50 132
    // first): wait for the line after it.
    d.wait_for("the job's first size printed", WAIT, || {
        log(&d, id).contains("is-a-terminal").then_some(())
    });
    d.send_input(id, &json!({"resize": {"rows": 50, "cols": 132}}));
    d.send_input(id, &json!({"data": b64(b"typed words\n")}));
    let job = d.wait_state(id, "succeeded");
    let text = log(&d, id);
    assert!(text.contains("30 90\r\nis-a-terminal"), "{text:?} {job}");
    assert!(
        text.contains("typed words\r\n"),
        "the terminal echoes: {text:?}"
    );
    assert!(text.contains("50 132\r\ngot:typed words"), "{text:?}");

    // Input the job cannot take, or that is not input, is refused naming why.
    let (status, answer) = d.post(&format!("/v1/jobs/{id}/input"), &json!({"data": "aGk="}));
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (409, Some("not-running"))
    );
    let batch = d.submit(&d.blocking_job("batch", 1, 0));
    d.wait_state(batch, "running");
    let (status, answer) = d.post(&format!("/v1/jobs/{batch}/input"), &json!({"data": "aGk="}));
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (409, Some("no-input")),
        "{answer}"
    );
    let (status, answer) = d.post(&format!("/v1/jobs/{batch}/input"), &json!({"data": "h!"}));
    assert_eq!(
        (status, answer["error"]["field"].as_str()),
        (400, Some("data")),
        "{answer}"
    );
    d.release(batch);
    let mut bad = d.shell_job("bad", 1, 0, "true");
    bad["stdin"] = json!(true);
    let (status, answer) = d.post("/v1/jobs", &bad);
    assert_eq!(
        (status, answer["error"]["field"].as_str()),
        (400, Some("stdin")),
        "{answer}"
    );
}

#[test]
fn gantry_run_at_a_terminal_gives_the_job_one_and_ctrl_c_interrupts_the_command() {
    let d = Daemon::start(1);
    // `script` gives the client a terminal of its own; the keys are written to it once the
    // job runs: a line for `read`, then Ctrl-C for the `sleep`.
    let command = format!(
        "{} --server {} run -- sh -c 'read x; echo \"got:$x\"; trap \"echo interrupted; exit 7\" INT; sleep 60 & wait'",
        gantry_bin().display(),
        d.url()
    );
    let mut client = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env_remove("GANTRY_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`script` (util-linux) runs the client at a terminal");
    let id = 1;
    d.wait_for("the client to submit", WAIT, || {
        (d.get(&format!("/v1/jobs/{id}")).0 == 200).then_some(())
    });
    d.wait_state(id, "running");
    let mut keys = client.stdin.take().unwrap();
    keys.write_all(b"hello\n").unwrap();
    keys.flush().unwrap();
    d.wait_for("the job to read its line", WAIT, || {
        log(&d, id).contains("got:hello").then_some(())
    });
    keys.write_all(b"\x03").unwrap();
    keys.flush().unwrap();
    let job = d.wait_state(id, "failed");
    assert_eq!(job["exit_code"], 7, "{job}");
    let out = client.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("got:hello"), "{stdout}");
    assert!(stdout.contains("interrupted"), "{stdout}");
    assert_eq!(out.status.code(), Some(7), "{stdout}");
    let text = log(&d, id);
    assert!(
        text.contains("hello\r\n"),
        "typed keys are echoed: {text:?}"
    );
}

#[test]
fn a_job_on_an_agent_gets_its_input_through_the_agent() {
    let d = Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n"
        ),
    );
    let controller = d.url().to_string();
    let agent = Agent::start(&d, &controller, "node-a", 1, TOKEN);
    let spec = json!({
        "name": "remote-input", "kind": "interactive", "stdin": true,
        "argv": ["sh", "-c", "read a; read b; echo \"got:$a+$b\"; cat; echo end-of-input"],
        "tasks": tasks(1, 0),
    });
    let id = d.submit(&spec);
    let job = d.wait_state(id, "running");
    assert_eq!(job["tasks"][0]["node"], "node-a", "{job}");
    d.send_input(id, &json!({"data": b64(b"one\ntwo\nrest\n")}));
    d.send_input(id, &json!({"data": "", "eof": true}));
    d.wait_state(id, "succeeded");
    let text = d.wait_for("the agent's log", WAIT, || {
        let text = log(&d, id);
        text.contains("end-of-input").then_some(text)
    });
    assert_eq!(
        text,
        "got:one+two\nrest\nend-of-input\n",
        "{}",
        agent.log_tail()
    );
}
