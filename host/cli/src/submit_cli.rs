//! `gantry submit`: a command (`-- CMD ARGS`) or a batch script (`gantry submit job.sh`, or
//! `--script job.sh`) becomes a `POST /v1/jobs` job spec. A script's `#SBATCH` directives
//! are applied first (see `sbatch`), then every flag the user actually gave overrides the
//! directives that set the same thing; directives that were not applied, and notes on how
//! some were, are printed to stderr. An array prints one line per member job.
//!
//! Owns: the submit flags and their mapping onto `sbatch::Options`. Does not own the
//! directive syntax (`sbatch`) or HTTP (`cli::Client`).

use crate::cli::{Client, parse_duration_s};
use crate::sbatch::{self, CpuAmount, GpuAmount, Ignored, MemAmount, Options};
use anyhow::{Context, bail};
use gantry_api::model::ContainerMount;
use gantry_api::model::job_options::{ArraySpec, WarnSignal, parse_dependencies};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Options of `gantry submit`. Resource flags are per task unless they say otherwise.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SubmitArgs {
    /// A batch script to run: its `#SBATCH` directives apply, and flags override them.
    #[arg(value_name = "SCRIPT")]
    pub script_file: Option<PathBuf>,
    /// Job name (default: the script's file name, or the command).
    #[arg(short = 'J', long, visible_alias = "job-name")]
    pub name: Option<String>,
    /// Whole GPUs per task.
    #[arg(long, visible_alias = "gpus-per-task", conflicts_with = "gpu_milli")]
    pub gpus: Option<u32>,
    /// A fraction of one GPU per task, in milli-GPU (e.g. 500).
    #[arg(long)]
    pub gpu_milli: Option<u32>,
    /// Allowed GPU model (repeatable).
    #[arg(long = "gpu-model")]
    pub gpu_models: Vec<String>,
    /// GPUs per node, as sbatch --gres=gpu[:TYPE]:N (divided over a node's tasks).
    #[arg(long, conflicts_with_all = ["gpus", "gpu_milli"])]
    pub gres: Option<String>,
    /// Tasks in the gang.
    #[arg(short = 'n', long, visible_alias = "ntasks")]
    pub tasks: Option<u32>,
    /// Nodes: the tasks run on exactly this many (per-node amounts are divided over a
    /// node's tasks).
    #[arg(short = 'N', long)]
    pub nodes: Option<u32>,
    /// Tasks per node (tasks = nodes × this, unless --tasks is given).
    #[arg(long)]
    pub ntasks_per_node: Option<u32>,
    /// CPU per task in milli-cores.
    #[arg(long, conflicts_with = "cpus_per_task")]
    pub cpu_milli: Option<u32>,
    /// Whole cores per task.
    #[arg(short = 'c', long)]
    pub cpus_per_task: Option<u32>,
    /// Memory per task in MiB.
    #[arg(long, conflicts_with = "mem")]
    pub mem_mib: Option<u64>,
    /// Memory per node, SLURM style (4096, 500M, 16G), divided over the node's tasks.
    #[arg(long, conflicts_with_all = ["mem_per_gpu", "mem_per_cpu"])]
    pub mem: Option<String>,
    /// Memory per GPU, SLURM style (16G).
    #[arg(long, conflicts_with_all = ["mem_mib", "mem_per_cpu"])]
    pub mem_per_gpu: Option<String>,
    /// Memory per CPU, SLURM style (2G).
    #[arg(long, conflicts_with = "mem_mib")]
    pub mem_per_cpu: Option<String>,
    /// Time limit (90s, 15m, 4h, 2d, or SLURM's MM, HH:MM:SS, D-HH:MM, UNLIMITED).
    #[arg(short = 't', long)]
    pub time: Option<String>,
    /// Queue.
    #[arg(short = 'p', long, visible_alias = "partition")]
    pub queue: Option<String>,
    /// Account (default: your token's first account; without tokens, your user).
    #[arg(short = 'A', long)]
    pub account: Option<String>,
    /// File for the tasks' stdout (and stderr unless --error), as sbatch -o: appended to,
    /// as the job's user, relative to its working directory; %j %A %a %x %u %t %N.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// File for the tasks' stderr, as sbatch -e.
    #[arg(short = 'e', long)]
    pub error: Option<String>,
    /// Priority tier.
    #[arg(long)]
    pub tier: Option<i32>,
    /// Allow preemption.
    #[arg(long)]
    pub preemptible: bool,
    /// Submit one job per index: 0-199%8, 1,3,5-9, 0-15:4 (GANTRY_ARRAY_INDEX).
    #[arg(short = 'a', long)]
    pub array: Option<String>,
    /// Start after other jobs: afterok:12:13,afterany:14,afternotok:15.
    #[arg(short = 'd', long)]
    pub dependency: Option<String>,
    /// Signal sent before the time limit and on eviction: [B:]SIG[@SECONDS], e.g. USR1@90.
    #[arg(long)]
    pub signal: Option<String>,
    /// Back to the queue when evicted.
    #[arg(long, overrides_with = "no_requeue")]
    pub requeue: bool,
    /// Submit held, as sbatch --hold: it waits until `gantry release`.
    #[arg(short = 'H', long)]
    pub hold: bool,
    /// Not to start before this time, as sbatch --begin: now+1hour, 16:00,
    /// 2026-12-24T18:00, tomorrow, midnight (local time).
    #[arg(short = 'b', long)]
    pub begin: Option<String>,
    /// Run the tasks in this container image: a registry reference
    /// (registry.lab/team/trainer:v7, name@sha256:...) or oci:/dir/layout:tag
    /// (sbatch: --container-image, Pyxis' spelling).
    #[arg(long, visible_alias = "container-image")]
    pub image: Option<String>,
    /// A host path to see inside the image, SRC[:DST][:ro] (repeatable; a comma list too,
    /// as Pyxis' --container-mounts).
    #[arg(long = "mount", visible_alias = "container-mounts")]
    pub mounts: Vec<String>,
    /// End as preempted when evicted.
    #[arg(long, overrides_with = "requeue")]
    pub no_requeue: bool,
    /// How many times it may be requeued.
    #[arg(long)]
    pub max_requeues: Option<u32>,
    /// Job kind.
    #[arg(long, value_parser = ["batch", "interactive", "service"])]
    pub kind: Option<String>,
    /// Environment variable K=V (repeatable; on top of what `--export` sends).
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// Which of your shell's variables the job gets, as sbatch's `--export`: ALL (default),
    /// NONE, or a list such as `PATH,HOME,LR=0.1` (`ALL,LR=0.1` adds to everything). Your
    /// `GANTRY_*` settings (the token among them) are never sent.
    #[arg(long)]
    pub export: Option<String>,
    /// Working directory of the job (sbatch's `-D`/`--chdir`; default: where you submit).
    #[arg(long, short = 'D')]
    pub chdir: Option<PathBuf>,
    /// Run this script file (like the SCRIPT argument).
    #[arg(long, conflicts_with = "script_file")]
    pub script: Option<PathBuf>,
    /// Print the job spec that would be sent, and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Say when the job would start (the daemon's forecast), and submit nothing (as sbatch
    /// --test-only).
    #[arg(long, conflicts_with = "dry_run")]
    pub test_only: bool,
    /// The command and its arguments (after `--`).
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// A job spec ready to send, with what the script's directives did not apply.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The JSON body of `POST /v1/jobs`.
    pub body: Value,
    /// Directives that were read but not applied.
    pub ignored: Vec<Ignored>,
    /// How some options were applied.
    pub notes: Vec<String>,
    /// The array asked for (its indices name the member jobs when they are printed).
    pub array: Option<ArraySpec>,
}

/// Parses `--time`/`-t`: Gantry's `90s`/`15m`/`4h`/`2d`, or a SLURM form: a bare number of
/// minutes (`-t 30`, as sbatch reads it), `MM:SS`, `HH:MM:SS`, `D-HH[:MM[:SS]]`, `UNLIMITED`.
pub fn parse_time_flag(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let bare = !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    if bare || t.contains([':', '-']) || t.eq_ignore_ascii_case("unlimited") {
        return sbatch::values::parse_time(t).map_err(|e| anyhow::anyhow!("--time {e}"));
    }
    parse_duration_s(t)
}

impl SubmitArgs {
    /// The options the flags set; `None` for every flag not given.
    pub fn options(&self) -> anyhow::Result<Options> {
        let mut gpu_models = self.gpu_models.clone();
        let gres = match &self.gres {
            Some(text) => {
                let mut per_node = None;
                for g in
                    sbatch::values::parse_gres(text).map_err(|e| anyhow::anyhow!("--gres {e}"))?
                {
                    match g {
                        sbatch::values::Gres::Gpu { count, model } => {
                            per_node = Some(GpuAmount::PerNode(count));
                            gpu_models.extend(model);
                        }
                        sbatch::values::Gres::Other(name) => {
                            bail!("--gres {name}: GPUs are the only generic resource Gantry has")
                        }
                    }
                }
                per_node
            }
            None => None,
        };
        let gpus = match (self.gpus, self.gpu_milli) {
            (Some(n), _) => Some(GpuAmount::PerTask(n)),
            (None, Some(m)) => Some(GpuAmount::MilliPerTask(m)),
            (None, None) => gres,
        };
        let cpu = match (self.cpu_milli, self.cpus_per_task) {
            (Some(m), _) => Some(CpuAmount::MilliPerTask(m)),
            (None, Some(c)) => Some(CpuAmount::MilliPerTask(
                c.checked_mul(1000)
                    .context("--cpus-per-task is too large")?,
            )),
            (None, None) => None,
        };
        let mib = |flag: &str, text: &str| {
            sbatch::values::parse_mem_mib(text).map_err(|e| anyhow::anyhow!("--{flag} {e}"))
        };
        let memory = match (
            self.mem_mib,
            &self.mem,
            &self.mem_per_gpu,
            &self.mem_per_cpu,
        ) {
            (Some(m), ..) => Some(MemAmount::PerTask(m)),
            (None, Some(text), ..) => Some(MemAmount::PerNode(mib("mem", text)?)),
            (None, None, Some(text), _) => Some(MemAmount::PerGpu(mib("mem-per-gpu", text)?)),
            (None, None, None, Some(text)) => Some(MemAmount::PerCpu(mib("mem-per-cpu", text)?)),
            (None, None, None, None) => None,
        };
        let kind = self
            .kind
            .as_deref()
            .map(|k| serde_json::from_value(Value::from(k)))
            .transpose()
            .context("--kind")?;
        let flag = |name: &str, e: String| anyhow::anyhow!("--{name} {e}");
        Ok(Options {
            name: self.name.clone(),
            queue: self.queue.clone(),
            account: self.account.clone(),
            workdir: self
                .chdir
                .as_ref()
                .map(|d| d.to_string_lossy().into_owned()),
            nodes: self.nodes,
            ntasks: self.tasks,
            ntasks_per_node: self.ntasks_per_node,
            gpus,
            gpu_models: (!gpu_models.is_empty()).then_some(gpu_models),
            cpu,
            memory,
            time_limit_s: self.time.as_deref().map(parse_time_flag).transpose()?,
            array: self
                .array
                .as_deref()
                .map(ArraySpec::parse)
                .transpose()
                .map_err(|e| flag("array", e))?,
            dependencies: self
                .dependency
                .as_deref()
                .map(parse_dependencies)
                .transpose()
                .map_err(|e| flag("dependency", e))?,
            requeue: match (self.requeue, self.no_requeue) {
                (true, _) => Some(true),
                (false, true) => Some(false),
                _ => None,
            },
            signal: self
                .signal
                .as_deref()
                .map(WarnSignal::parse)
                .transpose()
                .map_err(|e| flag("signal", e))?,
            max_requeues: self.max_requeues,
            hold: self.hold.then_some(true),
            output: self.output.clone(),
            error: self.error.clone(),
            begin_ms: self
                .begin
                .as_deref()
                .map(|t| crate::begin_time::parse(t, &jiff::Zoned::now()))
                .transpose()
                .map_err(|e| flag("begin", e))?,
            tier: self.tier,
            preemptible: self.preemptible.then_some(true),
            kind,
            export: self.export.clone(),
            wrap: None,
            parsable: None,
            test_only: None,
            quiet: None,
            image: self.image.clone(),
            mounts: if self.mounts.is_empty() {
                None
            } else {
                let mut all = Vec::new();
                for m in &self.mounts {
                    all.extend(ContainerMount::parse_list(m).map_err(|e| flag("mount", e))?);
                }
                Some(all)
            },
        })
    }

    /// The script file given, as the SCRIPT argument or `--script`.
    fn script_path(&self) -> Option<&Path> {
        self.script_file.as_deref().or(self.script.as_deref())
    }
}

/// Builds the submission from the flags and, when given, the script's text; `script` is
/// `(file name for messages, text)`.
pub fn build(a: &SubmitArgs, script: Option<(&str, &str)>) -> anyhow::Result<Submission> {
    if script.is_some() && !a.command.is_empty() {
        bail!("give a script or a command after `--`, not both");
    }
    if script.is_none() && a.command.is_empty() {
        bail!(
            "give a command after `--` (e.g. gantry submit --gpus 1 -- python train.py) or a script (gantry submit job.sh)"
        );
    }
    let parsed = match script {
        Some((file, text)) => read_script(file, text)?,
        None => sbatch::Parsed::default(),
    };
    let options = parsed.options.clone().overridden_by(a.options()?);
    build_with(options, parsed, script, &a.command, &a.env)
}

/// The directives of a batch script, refusing what sbatch refuses before reading them: DOS
/// line ends (the interpreter would be looked for as `/bin/bash\r`, exit 127).
pub fn read_script(file: &str, text: &str) -> anyhow::Result<sbatch::Parsed> {
    if text.contains("\r\n") {
        bail!(
            "{file}: the script has DOS line breaks (\\r\\n), which would make its first line \
             name an interpreter that does not exist; convert it with `dos2unix {file}` \
             (or `sed -i 's/\\r$//' {file}`) and submit again"
        );
    }
    sbatch::parse(text).map_err(|e| anyhow::anyhow!(e.located(file)))
}

/// Builds the submission from merged `options` (directives, then whatever overrides them),
/// what the script's directives did not apply (`parsed`), the script or the command, and
/// `--env K=V` pairs.
pub fn build_with(
    options: Options,
    parsed: sbatch::Parsed,
    script: Option<(&str, &str)>,
    command: &[String],
    extra_env: &[String],
) -> anyhow::Result<Submission> {
    let shape = options.task_shape().map_err(anyhow::Error::msg)?;
    let mut notes = parsed.notes;
    notes.extend(options.notes(&shape));
    let mut body = serde_json::Map::new();
    let export = options.export.as_deref().unwrap_or("ALL");
    let mut env = crate::export::exported(export, std::env::vars_os())?;
    let cwd = std::env::current_dir().ok();
    if let Some(dir) = &cwd {
        let dir = Value::String(dir.to_string_lossy().into_owned());
        env.insert("SLURM_SUBMIT_DIR".into(), dir.clone());
        env.insert("GANTRY_SUBMIT_DIR".into(), dir);
    }
    let user = std::env::var("USER").unwrap_or_default();
    crate::export::drop_roots_identity(&mut env, &user, crate::export::own_uid());
    env.extend(crate::cli::env_vars(extra_env)?);
    let default_name = match script {
        Some((file, _)) => Path::new(file)
            .file_name()
            .map_or_else(|| "script".into(), |f| f.to_string_lossy().into_owned()),
        None => command.first().cloned().unwrap_or_default(),
    };
    body.insert("name".into(), Value::String(default_name));
    body.insert("argv".into(), Value::from(command.to_vec()));
    body.insert("script".into(), Value::from(script.map(|(_, t)| t)));
    body.insert("env".into(), Value::Object(env));
    // In an image the submit directory means nothing (the image's own, unless -D names
    // one inside it).
    if options.image.is_none() {
        body.insert(
            "workdir".into(),
            Value::from(cwd.map(|d| d.to_string_lossy().into_owned())),
        );
    }
    body.insert("user".into(), Value::String(user));
    body.extend(options.spec_fields().map_err(anyhow::Error::msg)?);
    Ok(Submission {
        body: Value::Object(body),
        ignored: parsed.ignored,
        notes,
        array: options.array.clone(),
    })
}

/// `gantry submit`: reads the script, prints what was not applied, sends the job and
/// prints its id (every member's, for an array).
pub fn run(client: &Client, a: &SubmitArgs) -> anyhow::Result<()> {
    if let Some(path) = a.script_path().filter(|p| spec_format(p).is_some()) {
        return submit_spec_file(client, a, path);
    }
    let text = match a.script_path() {
        Some(p) => Some((
            p.display().to_string(),
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
        )),
        None => None,
    };
    let mut sub = build(a, text.as_ref().map(|(f, t)| (f.as_str(), t.as_str())))?;
    for i in &sub.ignored {
        eprintln!("gantry: {i}");
    }
    for n in &sub.notes {
        eprintln!("gantry: note: {n}");
    }
    if a.dry_run {
        crate::cli::print_json(&sub.body);
        return Ok(());
    }
    if client.has_token() {
        // The daemon takes the user from the token.
        if let Some(body) = sub.body.as_object_mut() {
            body.insert("user".into(), Value::String(String::new()));
        }
    } else {
        crate::cli::warn_if_anonymous(client);
    }
    if a.test_only {
        let f = client.what_if(&sub.body, None)?;
        println!(
            "would start {}; nothing was submitted",
            crate::start_view::describe(&f)
        );
        return Ok(());
    }
    let submitted = client.submit(&sub.body)?;
    let indices = sub.array.map(|a| a.indices).unwrap_or_default();
    let ids = &submitted.array_job_ids;
    if ids.is_empty() {
        println!("submitted job {}", submitted.job.id);
        return Ok(());
    }
    for (k, id) in ids.iter().enumerate() {
        match indices.get(k).filter(|_| indices.len() == ids.len()) {
            Some(index) => println!("submitted job {id} (array index {index})"),
            None => println!("submitted job {id}"),
        }
    }
    Ok(())
}

/// How a job spec file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpecFormat {
    Json,
    Yaml,
}

/// Whether `path` names a job spec (`.json`, `.yaml`, `.yml`) rather than a script to run.
fn spec_format(path: &Path) -> Option<SpecFormat> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "json" => Some(SpecFormat::Json),
        "yaml" | "yml" => Some(SpecFormat::Yaml),
        _ => None,
    }
}

/// The job spec in `text`, as the JSON the API takes.
fn parse_spec(text: &str, format: SpecFormat, path: &Path) -> anyhow::Result<Value> {
    Ok(match format {
        SpecFormat::Json => serde_json::from_str(text)
            .with_context(|| format!("{} is not a JSON job spec", path.display()))?,
        SpecFormat::Yaml => serde_yaml::from_str(text)
            .with_context(|| format!("{} is not a YAML job spec", path.display()))?,
    })
}

/// `gantry submit job.json` (or `job.yaml`): sends the job spec in the file as it is (as
/// `kubectl apply -f` does), with `workdir` (where you submit) and `user` filled in when it has
/// none; no other flag applies to it.
fn submit_spec_file(client: &Client, a: &SubmitArgs, path: &Path) -> anyhow::Result<()> {
    if !a.command.is_empty() {
        bail!("give a job spec file or a command after `--`, not both");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let format = spec_format(path).unwrap_or(SpecFormat::Json);
    let mut spec = parse_spec(&text, format, path)?;
    let Some(body) = spec.as_object_mut() else {
        bail!(
            "{} must hold a mapping of fields (a job spec)",
            path.display()
        );
    };
    if !body.contains_key("workdir")
        && let Ok(dir) = std::env::current_dir()
    {
        body.insert(
            "workdir".into(),
            Value::String(dir.to_string_lossy().into_owned()),
        );
    }
    if client.has_token() {
        body.insert("user".into(), Value::String(String::new()));
    } else {
        if !body.contains_key("user") {
            let user = std::env::var("USER").unwrap_or_default();
            body.insert("user".into(), Value::String(user));
        }
        crate::cli::warn_if_anonymous(client);
    }
    if a.dry_run {
        crate::cli::print_json(&spec);
        return Ok(());
    }
    let submitted = client.submit(&spec)?;
    if submitted.array_job_ids.is_empty() {
        println!("submitted job {}", submitted.job.id);
    }
    for id in &submitted.array_job_ids {
        println!("submitted job {id}");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
