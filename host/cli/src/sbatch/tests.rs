#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::values::{Gres, parse_gpu_count, parse_gres, parse_mem_mib, parse_time, split_words};
use super::*;
use gantry_api::model::job_options::DependencyKind;

fn options(script: &str) -> Options {
    parse(script).unwrap().options
}

fn shape(script: &str) -> TaskShape {
    options(script).task_shape().unwrap()
}

#[test]
fn time_limits_in_every_slurm_form() {
    for (text, seconds) in [
        ("5", 300),
        ("05:30", 330),
        ("01:02:03", 3723),
        ("2-3", 2 * 86_400 + 3 * 3600),
        ("2-03:04", 2 * 86_400 + 3 * 3600 + 4 * 60),
        ("1-00:00:10", 86_410),
        ("UNLIMITED", 0),
        ("infinite", 0),
        ("0", 0),
    ] {
        assert_eq!(parse_time(text), Ok(seconds), "{text}");
    }
    for bad in [
        "abc",
        "",
        "1:2:3:4",
        "1-2:3:4:5",
        "-5",
        "1-",
        "5m",
        "1:x",
        "99999999999999999999",
    ] {
        assert!(parse_time(bad).is_err(), "{bad} should be refused");
    }
    // Overflow is an error, not a wrap or a panic.
    assert!(parse_time("18446744073709551615-0").is_err());
}

#[test]
fn memory_sizes_and_gpu_forms() {
    assert_eq!(parse_mem_mib("4096"), Ok(4096));
    assert_eq!(parse_mem_mib("500M"), Ok(500));
    assert_eq!(parse_mem_mib("16G"), Ok(16 * 1024));
    assert_eq!(parse_mem_mib("1t"), Ok(1024 * 1024));
    assert_eq!(parse_mem_mib("1500K"), Ok(2));
    assert_eq!(parse_mem_mib("16GB"), Ok(16 * 1024));
    assert_eq!(parse_mem_mib("512MB"), Ok(512));
    assert!(parse_mem_mib("16GiB").is_err());
    assert!(parse_mem_mib("lots").is_err());
    assert!(parse_mem_mib("99999999999999999T").is_err());
    assert_eq!(parse_gpu_count("4"), Ok((4, None)));
    assert_eq!(parse_gpu_count("a100:2"), Ok((2, Some("a100".into()))));
    assert!(parse_gpu_count(":2").is_err());
    assert!(parse_gpu_count("a100").is_err());
    assert_eq!(
        parse_gres("gpu:a100:4,license:1").unwrap(),
        vec![
            Gres::Gpu {
                count: 4,
                model: Some("a100".into())
            },
            Gres::Other("license:1".into())
        ]
    );
    assert_eq!(
        parse_gres("gpu").unwrap(),
        vec![Gres::Gpu {
            count: 1,
            model: None
        }]
    );
    assert!(parse_gres("gpu:a:b:c").is_err());
}

#[test]
fn words_are_split_like_a_shell() {
    assert_eq!(
        split_words(r#" --job-name="my job" -J 'x y' a\ b # comment --time=5"#).unwrap(),
        vec!["--job-name=my job", "-J", "x y", "a b"]
    );
    assert!(split_words("--job-name=\"open").is_err());
}

#[test]
fn every_applied_directive_sets_its_option() {
    let o = options(
        "#!/bin/bash
#SBATCH --job-name=train -p gpu,cpu -A lab --chdir /data
#SBATCH -N 2 --ntasks-per-node=4 --gres=gpu:a100:4
#SBATCH --cpus-per-task=8 --mem=64G -t 1-00:00
#SBATCH --array=0-9%2 -d afterok:12:13 --no-requeue --signal=B:USR1@90
python train.py
",
    );
    assert_eq!(o.name.as_deref(), Some("train"));
    assert_eq!(o.queue.as_deref(), Some("gpu"));
    assert_eq!(o.account.as_deref(), Some("lab"));
    assert_eq!(o.workdir.as_deref(), Some("/data"));
    assert_eq!((o.nodes, o.ntasks_per_node), (Some(2), Some(4)));
    assert_eq!(o.gpus, Some(GpuAmount::PerNode(4)));
    assert_eq!(o.gpu_models, Some(vec!["a100".to_string()]));
    assert_eq!(o.cpu, Some(CpuAmount::MilliPerTask(8000)));
    assert_eq!(o.memory, Some(MemAmount::PerNode(65_536)));
    assert_eq!(o.time_limit_s, Some(86_400));
    let array = o.array.as_ref().unwrap();
    assert_eq!((array.indices.len(), array.max_running), (10, Some(2)));
    let deps = o.dependencies.as_ref().unwrap();
    assert_eq!(deps.len(), 2);
    assert_eq!(deps[1].kind, DependencyKind::Afterok);
    assert_eq!(deps[1].job, 13);
    assert_eq!(o.requeue, Some(false));
    assert_eq!(o.signal.as_ref().unwrap().before_s, 90);

    // 2 nodes × 4 tasks; each node's 4 GPUs and 64 GiB are divided over its 4 tasks.
    let t = o.task_shape().unwrap();
    assert_eq!((t.count, t.tasks_per_node), (8, 4));
    assert_eq!((t.gpus, t.cpu_milli, t.memory_mib), (1, 8000, 16_384));
    assert_eq!(o.notes(&t).len(), 1, "multi-node placement is noted");
    assert!(parse("#SBATCH -p a,b\n").unwrap().notes[0].contains("`a`"));
}

#[test]
fn both_value_forms_short_forms_and_prefixes() {
    for script in [
        "#SBATCH --time=10 --ntasks=3\n",
        "#SBATCH --time 10 --ntasks 3\n",
        "#SBATCH -t 10 -n 3\n",
        "#SBATCH -t10 -n3\n",
        "#SBATCH --time=10\n#SBATCH --ntasks=3 --parti=gpu\n",
    ] {
        let o = options(script);
        assert_eq!((o.time_limit_s, o.ntasks), (Some(600), Some(3)), "{script}");
    }
    // `--n` is ambiguous (nodes, ntasks, ...): refused, as sbatch refuses it.
    let e = parse("#SBATCH --n=3\n").unwrap_err();
    assert!(e.message.contains("ambiguous"), "{}", e.message);
}

#[test]
fn gpu_directives_divide_over_tasks() {
    assert_eq!(shape("#SBATCH --gres=gpu:2\n").gpus, 2);
    assert_eq!(shape("#SBATCH --gpus=8 --ntasks=4\n").gpus, 2);
    assert_eq!(shape("#SBATCH --gpus-per-task=3 -n 2\n").gpus, 3);
    assert_eq!(
        shape("#SBATCH --gpus-per-node=4 --ntasks-per-node=2\n").gpus,
        2
    );
    let t = shape("#SBATCH --gpus=h100:2 --cpus-per-gpu=4 --mem-per-gpu=10G\n");
    assert_eq!(
        (t.gpus, t.cpu_milli, t.memory_mib, t.gpu_models),
        (2, 8000, 20_480, vec!["h100".to_string()])
    );
    let t = shape("#SBATCH -c 2 --mem-per-cpu=1G\n");
    assert_eq!((t.cpu_milli, t.memory_mib), (2000, 2048));
    // Defaults match TaskSpec's.
    let t = shape("#!/bin/sh\necho hi\n");
    assert_eq!(
        (t.count, t.gpus, t.cpu_milli, t.memory_mib),
        (1, 0, 1000, 1024)
    );
    let err = options("#SBATCH --gpus=5 -n 2\n").task_shape().unwrap_err();
    assert!(err.contains("--gpus=5"), "{err}");
    assert!(options("#SBATCH --cpus-per-gpu=2\n").task_shape().is_err());
}

#[test]
fn unapplied_directives_are_listed_with_line_and_reason() {
    let p = parse(
        "#!/bin/bash
# a comment

#SBATCH --mail-type=END --mail-user me@example.org
#SBATCH --output=slurm-%j.out -e err-%A_%a.txt --exclusive
#SBATCH --qos=high --gres=gpu:1,license:2 --wckey=x --mem=0
  #SBATCH --time=5
echo start
#SBATCH --time=10
",
    )
    .unwrap();
    let got: Vec<(usize, &str)> = p
        .ignored
        .iter()
        .map(|i| (i.line, i.directive.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (4, "--mail-type=END"),
            (4, "--mail-user me@example.org"),
            (5, "--exclusive"),
            (6, "--qos=high"),
            (6, "--gres=license:2"),
            (6, "--wckey=x"),
            (6, "--mem=0"),
            (7, "--time=5"),
            (9, "--time=10"),
        ]
    );
    assert!(p.ignored[0].reason.contains("e-mail"));
    assert!(p.ignored[8].reason.contains("first command"));
    // --output and --error are applied now (they were ignored before).
    assert_eq!(p.options.output.as_deref(), Some("slurm-%j.out"));
    assert_eq!(p.options.error.as_deref(), Some("err-%A_%a.txt"));
    assert_eq!(
        p.ignored[0].to_string(),
        "ignored #SBATCH --mail-type=END (line 4): e-mail is not supported"
    );
    // What was applied on the same lines still is; nothing after `echo start` is.
    assert_eq!(p.options.gpus, Some(GpuAmount::PerNode(1)));
    assert_eq!(p.options.time_limit_s, None);
    assert_eq!(p.options.memory, None);
}

#[test]
fn errors_name_the_line_and_the_directive() {
    let e = parse("#!/bin/sh\n#SBATCH -J x\n\n#SBATCH --time=abc\n").unwrap_err();
    assert_eq!((e.line, e.directive.as_str()), (4, "--time=abc"));
    assert!(
        e.located("job.sh").starts_with("job.sh:4: --time=abc: "),
        "{}",
        e.located("job.sh")
    );
    for (script, directive) in [
        ("#SBATCH --ntasks\n", "--ntasks"),
        ("#SBATCH -n 0\n", "-n 0"),
        ("#SBATCH --requeue=yes\n", "--requeue=yes"),
        ("#SBATCH --array=5-1\n", "--array=5-1"),
        ("#SBATCH --dependency=after:3\n", "--dependency=after:3"),
        ("#SBATCH --signal=KILL\n", "--signal=KILL"),
        ("#SBATCH --gres=gpu:x:y:z\n", "--gres=gpu:x:y:z"),
        ("#SBATCH --mem 12Q\n", "--mem 12Q"),
        ("#SBATCH -N 3-1\n", "-N 3-1"),
    ] {
        let e = parse(script).unwrap_err();
        assert_eq!((e.line, e.directive.as_str()), (1, directive), "{script}");
    }
    let e = parse("#SBATCH --job-name='open\n").unwrap_err();
    assert_eq!(e.line, 1);
    // A misspelt option is refused with the nearest spelling; a real sbatch option that
    // Gantry does not apply is only reported.
    let e = parse("#!/bin/sh\n#SBATCH --gress=gpu:1\n").unwrap_err();
    assert_eq!((e.line, e.directive.as_str()), (2, "--gress=gpu:1"));
    assert!(e.message.contains("did you mean --gres?"), "{}", e.message);
    let e = parse("#SBATCH --cpu-per-task 4\n").unwrap_err();
    assert!(e.message.contains("--cpus-per-task"), "{}", e.message);
    let p = parse("#SBATCH --tmp=10G --wckey=x\n").unwrap();
    assert_eq!(p.ignored.len(), 2);
}

#[test]
fn flags_override_only_what_they_set() {
    let script = options("#SBATCH --time=00:05:00 --gres=gpu:a100:2 -J from-script -n 2\n");
    let flags = Options {
        time_limit_s: Some(600),
        ntasks: Some(4),
        ..Options::default()
    };
    let o = script.overridden_by(flags);
    assert_eq!(o.time_limit_s, Some(600));
    assert_eq!(o.ntasks, Some(4));
    assert_eq!(o.name.as_deref(), Some("from-script"));
    assert_eq!(o.gpus, Some(GpuAmount::PerNode(2)));
    assert_eq!(o.gpu_models, Some(vec!["a100".to_string()]));
}

#[test]
fn spec_fields_are_a_valid_job_spec() {
    let o = options(
        "#SBATCH --gres=gpu:2 --time=00:05:00 --array=0-3 -J arr --requeue\n\
         #SBATCH --dependency=afterany:7 --signal=USR1@30 -p batch\n",
    );
    let mut fields = o.spec_fields().unwrap();
    fields.insert("script".into(), "echo $GANTRY_ARRAY_INDEX".into());
    let mut spec: gantry_api::model::JobSpec =
        serde_json::from_value(serde_json::Value::Object(fields)).unwrap();
    spec.validate().unwrap();
    assert_eq!(spec.name, "arr");
    assert_eq!(spec.queue, "batch");
    assert_eq!(spec.time_limit_s, 300);
    assert_eq!(spec.tasks[0].gpus, 2);
    assert_eq!(spec.array.unwrap().indices, vec![0, 1, 2, 3]);
    assert_eq!(spec.dependencies.len(), 1);
    assert_eq!(spec.signal.unwrap().before_s, 30);
    assert!(spec.requeue);
}

#[test]
fn hold_submits_held_and_begin_sets_the_begin_time() {
    let before = jiff::Timestamp::now().as_millisecond() as u64;
    let parsed = parse("#!/bin/sh\n#SBATCH --hold\n#SBATCH --begin=now+1hour\ntrue\n").unwrap();
    assert_eq!(parsed.options.hold, Some(true));
    let begin = parsed.options.begin_ms.unwrap();
    assert!(
        begin >= before + 3_600_000 && begin < before + 3_700_000,
        "{begin}"
    );
    assert!(parsed.ignored.is_empty(), "{:?}", parsed.ignored);
    let wrong = parse("#!/bin/sh\n#SBATCH --begin=someday\ntrue\n").unwrap_err();
    assert!(wrong.to_string().contains("begin"), "{wrong}");
}

#[test]
fn words_that_are_no_sbatch_option_are_refused_with_the_nearest() {
    for (script, hint) in [
        ("#SBATCH --tme=10\n", "--time"),
        ("#SBATCH --frobnicate 3\n", "no such option"),
        ("#SBATCH --partiton=gpu\n", "--partition"),
        ("#SBATCH --mial-type=END\n", "--mail-type"),
        ("#SBATCH -z\n", "no such option"),
    ] {
        let e = parse(script).unwrap_err();
        assert!(e.message.contains(hint), "{script}: {}", e.message);
    }
    // Real sbatch options Gantry does not serve are accepted and reported.
    let p = parse("#SBATCH --wckey=x --mail-type=END --contiguous -k\n").unwrap();
    assert_eq!(p.ignored.len(), 4, "{:?}", p.ignored);
}

#[test]
fn the_command_line_splits_options_script_and_its_arguments() {
    let words = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_string).collect() };
    let c = parse_command_line(&words(
        "--parsable -p gpu -t 1:00:00 --contiguous job.sh a b",
    ))
    .unwrap();
    assert_eq!(c.script.as_deref(), Some("job.sh"));
    assert_eq!(c.script_args, ["a", "b"]);
    assert_eq!(c.parsed.options.parsable, Some(true));
    assert_eq!(c.parsed.options.queue.as_deref(), Some("gpu"));
    assert_eq!(c.parsed.options.time_limit_s, Some(3600));
    let c = parse_command_line(&words("--wrap=hostname --export=NONE -J x")).unwrap();
    assert_eq!(c.script, None);
    assert_eq!(c.parsed.options.wrap.as_deref(), Some("hostname"));
    assert_eq!(c.parsed.options.export.as_deref(), Some("NONE"));
    assert!(parse_command_line(&words("--tme=10 job.sh")).is_err());
    assert!(parse_command_line(&words("-t soon job.sh")).is_err());
    let e = parse_command_line(&words("--open-mode=sometimes job.sh")).unwrap_err();
    assert!(e.message.contains("append"), "{}", e.message);
}

#[test]
fn per_node_gpus_that_do_not_divide_over_one_nodes_tasks_are_shared() {
    let o = options("#SBATCH -n 3 --gres=gpu:2\n");
    let shape = o.task_shape().unwrap();
    assert_eq!((shape.gpus, shape.shared_gpus, shape.count), (0, 2, 3));
    let fields = o.spec_fields().unwrap();
    let groups = fields["tasks"].as_array().unwrap();
    assert_eq!(
        (groups[0]["count"].as_u64(), groups[0]["gpus"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(
        (groups[1]["count"].as_u64(), groups[1]["gpus"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(fields["share_node_gpus"], true);
    assert_eq!(fields["nodes"], 1);
    // Divisible: each task its own, as before; over several nodes: still refused.
    assert_eq!(shape_of("#SBATCH -n 2 --gres=gpu:2\n"), (1, 0));
    assert!(
        options("#SBATCH -N 2 -n 6 --gres=gpu:2\n")
            .task_shape()
            .is_err()
    );
}

fn shape_of(script: &str) -> (u32, u32) {
    let s = options(script).task_shape().unwrap();
    (s.gpus, s.shared_gpus)
}
