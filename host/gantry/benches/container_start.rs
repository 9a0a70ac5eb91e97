//! Benchmark: what an image costs a job (issue 29). Needs root, runc, umoci, skopeo,
//! busybox-static and docker-registry (the packages `.ci/run` installs).
//!
//! `cargo bench -p gantry --bench container_start` starts the real `gantry serve`
//! (cgroups `auto`, tasks as their user: anonymous jobs run as `nobody`) and, in one run:
//!
//! * `host` / `image`: `BENCH_REPS` (20) jobs of `true` one after another on the host and in
//!   a cached image (built with `umoci` from busybox): submit → ended, median and p90; the
//!   CPU of the daemon and everything it started, per job;
//! * `runc_by_hand`: `runc run` of the last image job's own bundle, as many times: the floor
//!   of a container start on this machine;
//! * `cold_pull`: the image pushed to a `docker-registry` on 127.0.0.1, then `skopeo copy`
//!   of it into an empty layout by hand, against a job in it on a daemon with an empty cache
//!   (submit → ended: pull, unpack, run).
//!
//! Jobs ask for one CPU: the runtime's own start (`runc init`, Go) runs in the container's
//! cgroup and is charged to the task's CPU quota, so with a tenth of a CPU a container
//! takes about 300 ms to start here instead of about 70.
//!
//! Prints `RESULT {json}`; asserts nothing about speed.

#[allow(dead_code)]
#[path = "exec_throughput/support.rs"]
mod support;

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Result, agent, cpu, cpu_report, get, start_with, submit};

fn tool(cmd: &mut Command) -> Result<()> {
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

fn build_image(dir: &Path) -> Result<String> {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("bin"))?;
    std::fs::copy("/bin/busybox", src.join("bin/busybox"))?;
    for t in ["sh", "true"] {
        std::os::unix::fs::symlink("busybox", src.join("bin").join(t))?;
    }
    let l = dir.join("layout");
    let l = l.to_str().ok_or("path")?;
    tool(Command::new("umoci").args(["init", "--layout", l]))?;
    tool(Command::new("umoci").args(["new", "--image", &format!("{l}:b")]))?;
    tool(
        Command::new("umoci")
            .args(["insert", "--image", &format!("{l}:b")])
            .arg(&src)
            .arg("/"),
    )?;
    tool(Command::new("umoci").args([
        "config",
        "--image",
        &format!("{l}:b"),
        "--config.env",
        "PATH=/bin",
    ]))?;
    Ok(format!("{l}:b"))
}

/// Seconds from submit to the job's end; fails unless it succeeded.
fn submit_to_end(http: &ureq::Agent, base: &str, spec: &Value) -> Result<f64> {
    let t0 = Instant::now();
    let id = submit(http, base, spec)?["id"].as_u64().ok_or("no id")?;
    loop {
        let job = get(http, &format!("{base}/v1/jobs/{id}"))?;
        match job["state"].as_str() {
            Some("succeeded") => return Ok(t0.elapsed().as_secs_f64()),
            Some("failed" | "cancelled") => return Err(format!("job {id}: {job}").into()),
            _ if t0.elapsed() > Duration::from_secs(120) => return Err("timeout".into()),
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn summary(name: &str, mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1] * 1000.0;
    json!({"what": name, "n": v.len(), "median_ms": at(0.5), "p90_ms": at(0.9)})
}

fn job(image: Option<&str>) -> Value {
    json!({"name": "c", "argv": ["true"], "image": image,
           "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 1000, "memory_mib": 256}]})
}

fn containers_config(images: &Path, registry: &str) -> String {
    format!(
        "[containers]\nimage_dirs = [\"{}\"]\ninsecure_registries = [\"{registry}\"]\n",
        images.display()
    )
}

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let reps: usize = std::env::var("BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let tmp = tempfile::tempdir()?;
    let images = tmp.path().join("images");
    let image = format!("oci:{}", build_image(&images)?);
    let registry_dir = tmp.path().join("registry");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let registry = format!("127.0.0.1:{port}");
    std::fs::create_dir_all(&registry_dir)?;
    let reg_cfg = registry_dir.join("config.yml");
    std::fs::write(
        &reg_cfg,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {registry}\n",
            registry_dir.join("data").display()
        ),
    )?;
    let mut reg = Command::new("docker-registry")
        .arg("serve")
        .arg(&reg_cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let http = agent();
    let mut results = Vec::new();
    {
        let dir = tmp.path().join("warm");
        std::fs::create_dir_all(&dir)?;
        let d = start_with(&dir, &containers_config(&images, &registry))?;
        submit_to_end(&http, &d.base, &job(Some(&image)))?; // unpack once: the cache is warm
        for (name, img) in [("host", None), ("image", Some(image.as_str()))] {
            let before = cpu(d.child.id())?;
            let times = (0..reps)
                .map(|_| submit_to_end(&http, &d.base, &job(img)))
                .collect::<Result<Vec<_>>>()?;
            let mut r = summary(name, times);
            let c = cpu_report(&before, &cpu(d.child.id())?);
            let total = c["cpu_s_gantry"].as_f64().unwrap_or(0.0)
                + c["cpu_s_gantry_reaped_children"].as_f64().unwrap_or(0.0);
            r["cpu_ms_per_job"] = json!(total * 1000.0 / reps as f64);
            results.push(r);
        }
        // The last image job's bundle, run by hand.
        let last = get(&http, &format!("{}/v1/jobs?limit=1", d.base))?;
        let id = last[0]["id"].as_u64().ok_or("no job")?;
        let bundle = dir
            .join("data/jobs")
            .join(id.to_string())
            .join("task-0.bundle");
        let state = tmp.path().join("runc-state");
        let mut times = Vec::new();
        for i in 0..reps {
            let t0 = Instant::now();
            tool(
                Command::new("runc")
                    .arg("--root")
                    .arg(&state)
                    .args(["run", "--bundle"])
                    .arg(&bundle)
                    .arg(format!("bench-{i}")),
            )?;
            times.push(t0.elapsed().as_secs_f64());
        }
        results.push(summary("runc_by_hand", times));
    }
    // Cold: the registry's copy, pulled by hand and by a job on an empty cache.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&registry).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let pushed = format!("{registry}/bench:v1");
    tool(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        &format!("oci:{}", &image[4..]),
        &format!("docker://{pushed}"),
    ]))?;
    let t0 = Instant::now();
    tool(
        Command::new("skopeo")
            .args([
                "copy",
                "--quiet",
                "--src-tls-verify=false",
                &format!("docker://{pushed}"),
            ])
            .arg(format!("oci:{}:x", tmp.path().join("by-hand").display())),
    )?;
    results.push(json!({"what": "skopeo_copy_by_hand", "ms": t0.elapsed().as_secs_f64() * 1000.0}));
    let dir = tmp.path().join("cold");
    std::fs::create_dir_all(&dir)?;
    let d = start_with(&dir, &containers_config(&images, &registry))?;
    let cold = submit_to_end(&http, &d.base, &job(Some(&pushed)))?;
    results.push(json!({"what": "cold_pull_job_submit_to_end", "ms": cold * 1000.0}));
    drop(d);
    let _ = reg.kill();
    let _ = reg.wait();
    println!("RESULT {}", json!({"reps": reps, "results": results}));
    Ok(())
}
