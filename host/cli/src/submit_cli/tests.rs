#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    submit: SubmitArgs,
}

fn args(argv: &[&str]) -> SubmitArgs {
    Cli::try_parse_from(std::iter::once("submit").chain(argv.iter().copied()))
        .unwrap()
        .submit
}

const SCRIPT: &str = "#!/bin/sh\n\
    #SBATCH --time=00:05:00 -n 2 --gres=gpu:a100:2 -p gpu -J from-script\n\
    #SBATCH --mem=2G --no-requeue --mail-type=END\n\
    echo hi\n";

fn body(argv: &[&str]) -> Value {
    build(&args(argv), Some(("job.sh", SCRIPT))).unwrap().body
}

#[test]
fn directives_apply_when_no_flag_is_given() {
    let b = body(&["job.sh"]);
    assert_eq!(b["time_limit_s"], 300);
    assert_eq!(b["queue"], "gpu");
    assert_eq!(b["name"], "from-script");
    assert_eq!(b["requeue"], false);
    assert_eq!(b["script"], SCRIPT);
    assert_eq!(b["argv"], serde_json::json!([]));
    let t = &b["tasks"][0];
    // The node's 2 GPUs and 2 GiB are divided over its 2 tasks.
    assert_eq!((&t["count"], &t["gpus"]), (&2.into(), &1.into()));
    assert_eq!(t["gpu_models"], serde_json::json!(["a100"]));
    assert_eq!(t["memory_mib"], 1024);
    // Unset flags send nothing, so the server's defaults hold.
    for absent in ["tier", "preemptible", "array", "kind", "account"] {
        assert!(b.get(absent).is_none(), "{absent} in {b}");
    }
    let sub = build(&args(&["job.sh"]), Some(("job.sh", SCRIPT))).unwrap();
    assert_eq!(sub.ignored.len(), 1);
    assert_eq!(sub.ignored[0].line, 3);
}

#[test]
fn flags_given_override_the_directives_they_match() {
    let b = body(&[
        "job.sh",
        "--time",
        "10m",
        "--gpus",
        "1",
        "--tasks",
        "4",
        "--queue",
        "debug",
        "--mem-mib",
        "300",
        "--requeue",
    ]);
    assert_eq!(b["time_limit_s"], 600);
    assert_eq!(b["queue"], "debug");
    assert_eq!(b["requeue"], true);
    let t = &b["tasks"][0];
    assert_eq!((&t["count"], &t["gpus"]), (&4.into(), &1.into()));
    assert_eq!(t["memory_mib"], 300);
    // Not overridden: the model and the name.
    assert_eq!(t["gpu_models"], serde_json::json!(["a100"]));
    assert_eq!(b["name"], "from-script");
    // SLURM time forms on the command line too.
    assert_eq!(
        body(&["job.sh", "--time", "1-00:00"])["time_limit_s"],
        86_400
    );
    // A bare number is minutes, as sbatch -t reads it.
    assert_eq!(body(&["job.sh", "--time", "90"])["time_limit_s"], 5400);
    assert_eq!(body(&["job.sh", "-t", "90s"])["time_limit_s"], 90);
    assert_eq!(body(&["job.sh", "--name", "mine"])["name"], "mine");
    assert_eq!(
        body(&["job.sh", "--no-requeue", "--requeue"])["requeue"],
        true
    );
}

#[test]
fn the_command_form_works_as_before_and_takes_the_new_flags() {
    let a = args(&[
        "--gpus",
        "2",
        "--tasks",
        "2",
        "--time",
        "1h",
        "--array",
        "0-3%2",
        "--dependency",
        "afterok:7",
        "--signal",
        "USR1@30",
        "--kind",
        "interactive",
        "--tier",
        "3",
        "--preemptible",
        "--env",
        "A=1",
        "--",
        "python",
        "train.py",
    ]);
    let b = build(&a, None).unwrap().body;
    assert_eq!(b["name"], "python");
    assert_eq!(b["argv"], serde_json::json!(["python", "train.py"]));
    assert_eq!(b["script"], Value::Null);
    assert_eq!(b["time_limit_s"], 3600);
    assert_eq!(b["array"]["indices"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(b["array"]["max_running"], 2);
    assert_eq!(b["dependencies"][0]["job"], 7);
    assert_eq!(b["signal"]["before_s"], 30);
    assert_eq!(b["kind"], "interactive");
    assert_eq!((&b["tier"], &b["preemptible"]), (&3.into(), &true.into()));
    assert_eq!(b["env"]["A"], "1");
    let t = &b["tasks"][0];
    assert_eq!(
        (&t["count"], &t["gpus"], &t["cpu_milli"]),
        (&2.into(), &2.into(), &1000.into())
    );
    // The body is a job spec the API accepts.
    let mut spec: gantry_api::model::JobSpec = serde_json::from_value(b).unwrap();
    spec.validate().unwrap();
}

#[test]
fn bad_input_is_refused_with_the_flag_or_line_named() {
    let err = |argv: &[&str], script: Option<&str>| {
        build(&args(argv), script.map(|s| ("job.sh", s)))
            .unwrap_err()
            .to_string()
    };
    assert!(err(&["--", "x", "--"], Some(SCRIPT)).contains("not both"));
    assert!(err(&[], None).contains("give a command"));
    assert!(err(&["--array", "9-1", "--", "x"], None).starts_with("--array"));
    assert!(err(&["--time", "1:x", "--", "x"], None).starts_with("--time"));
    assert!(err(&["--mem", "3Q", "--", "x"], None).starts_with("--mem"));
    assert!(err(&["job.sh"], Some("#SBATCH -J a\n#SBATCH --gpus=3 -n 2\n")).contains("--gpus=3"));
    assert_eq!(
        err(&["job.sh"], Some("#!/bin/sh\n#SBATCH --time=abc\n")),
        "job.sh:2: --time=abc: `abc` is not a whole number of time units \
         (use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)"
    );
    assert!(Cli::try_parse_from(["submit", "--kind", "daemon", "--", "x"]).is_err());
    assert!(Cli::try_parse_from(["submit", "--gpus", "1", "--gpu-milli", "5", "--", "x"]).is_err());
}

#[test]
fn a_yaml_spec_reads_as_the_same_json_and_other_files_are_scripts() {
    use std::path::Path;
    assert_eq!(spec_format(Path::new("job.json")), Some(SpecFormat::Json));
    assert_eq!(spec_format(Path::new("job.YML")), Some(SpecFormat::Yaml));
    assert_eq!(spec_format(Path::new("job.yaml")), Some(SpecFormat::Yaml));
    assert_eq!(spec_format(Path::new("job.sh")), None);
    assert_eq!(spec_format(Path::new("yaml")), None);
    let yaml = "name: from-yaml\nargv: [sh, -c, 'echo hi']\ntasks:\n  - count: 2\n    gpus: 1\n";
    let json = r#"{"name": "from-yaml", "argv": ["sh", "-c", "echo hi"],
                   "tasks": [{"count": 2, "gpus": 1}]}"#;
    let path = Path::new("job.yaml");
    assert_eq!(
        parse_spec(yaml, SpecFormat::Yaml, path).unwrap(),
        parse_spec(json, SpecFormat::Json, path).unwrap()
    );
    let err = parse_spec("name: [unclosed", SpecFormat::Yaml, path).unwrap_err();
    assert!(
        format!("{err:#}").contains("is not a YAML job spec"),
        "{err:#}"
    );
}
