//! Applying one `#SBATCH` option to [`Options`](super::Options): which field it sets and from
//! which value form, or why it is not applied (recorded in `Parsed::ignored`), or a note
//! when it is applied in part.
//!
//! Owns: the meaning of each option. Does not own the directive syntax (`sbatch`) or the
//! value forms (`values`).

use super::values::{
    self, Gres, parse_count, parse_gpu_count, parse_gres, parse_mem_mib, parse_nodes,
};
use super::{CpuAmount, GpuAmount, Ignored, MemAmount, Parsed};
use gantry_api::model::job_options::{ArraySpec, WarnSignal, parse_dependencies};

/// One directive being applied.
pub(super) struct Directive<'a> {
    /// Where the result goes.
    pub parsed: &'a mut Parsed,
    /// 1-based line of the script.
    pub line: usize,
    /// The directive as written.
    pub shown: &'a str,
}

impl Directive<'_> {
    fn ignore(&mut self, reason: &str) {
        self.parsed.ignored.push(Ignored {
            line: self.line,
            directive: self.shown.to_string(),
            reason: reason.to_string(),
        });
    }

    fn note(&mut self, note: String) {
        let note = format!("#SBATCH {} (line {}): {note}", self.shown, self.line);
        self.parsed.notes.push(note);
    }

    fn set_model(&mut self, model: Option<String>) {
        if let Some(m) = model {
            self.parsed.options.gpu_models = Some(vec![m]);
        }
    }

    /// Applies option `long` (a long name) with `value` (empty for a flag).
    pub fn apply(&mut self, long: &str, value: &str) -> Result<(), String> {
        let o = &mut self.parsed.options;
        match long {
            "job-name" => o.name = Some(value.to_string()),
            "account" => o.account = Some(value.to_string()),
            "chdir" => o.workdir = Some(value.to_string()),
            "partition" => {
                let first = value.split(',').next().unwrap_or_default().trim();
                if first.is_empty() {
                    return Err("names no partition".into());
                }
                o.queue = Some(first.to_string());
                if value.contains(',') {
                    self.note(format!("a Gantry job waits in one queue: using `{first}`"));
                }
            }
            "nodes" => {
                let (n, ranged) = parse_nodes(value)?;
                o.nodes = Some(n);
                if ranged {
                    self.note(format!("Gantry takes the minimum: {n}"));
                }
            }
            "ntasks" => o.ntasks = Some(parse_count(value)?),
            "ntasks-per-node" => o.ntasks_per_node = Some(parse_count(value)?),
            "gres" => {
                for g in parse_gres(value)? {
                    match g {
                        Gres::Gpu { count, model } => {
                            self.parsed.options.gpus = Some(GpuAmount::PerNode(count));
                            self.set_model(model);
                        }
                        Gres::Other(name) => self.parsed.ignored.push(Ignored {
                            line: self.line,
                            directive: format!("--gres={name}"),
                            reason: "GPUs are the only generic resource Gantry has".into(),
                        }),
                    }
                }
            }
            "gpus" | "gpus-per-task" | "gpus-per-node" => {
                let (n, model) = parse_gpu_count(value)?;
                o.gpus = Some(match long {
                    "gpus" => GpuAmount::Total(n),
                    "gpus-per-task" => GpuAmount::PerTask(n),
                    _ => GpuAmount::PerNode(n),
                });
                self.set_model(model);
            }
            "cpus-per-task" => {
                let milli = parse_count(value)?
                    .checked_mul(1000)
                    .ok_or("too many CPUs")?;
                o.cpu = Some(CpuAmount::MilliPerTask(milli));
            }
            "cpus-per-gpu" => o.cpu = Some(CpuAmount::PerGpu(parse_count(value)?)),
            "mem" | "mem-per-cpu" | "mem-per-gpu" => {
                let mib = parse_mem_mib(value)?;
                if mib == 0 {
                    self.ignore(
                        "0 means all of a node's memory in SLURM; Gantry needs a size \
                         (the default, 1024 MiB per task, applies)",
                    );
                    return Ok(());
                }
                o.memory = Some(match long {
                    "mem" => MemAmount::PerNode(mib),
                    "mem-per-cpu" => MemAmount::PerCpu(mib),
                    _ => MemAmount::PerGpu(mib),
                });
            }
            "time" => o.time_limit_s = Some(values::parse_time(value)?),
            "array" => o.array = Some(ArraySpec::parse(value)?),
            "dependency" => o.dependencies = Some(parse_dependencies(value)?),
            "requeue" => o.requeue = Some(true),
            "no-requeue" => o.requeue = Some(false),
            "signal" => o.signal = Some(WarnSignal::parse(value)?),
            "output" => o.output = Some(value.to_string()),
            "error" => o.error = Some(value.to_string()),
            "input" => self.ignore("tasks get no input"),
            "qos" => self.ignore(
                "Gantry has no QOS: the queue's policy sets priority (or give \
                 gantry submit --tier N)",
            ),
            "exclusive" | "oversubscribe" => self.ignore(
                "Gantry allocates GPUs, CPU and memory per task and shares nodes as its \
                 placement policy decides: ask for what the job needs",
            ),
            "mail-type" | "mail-user" => self.ignore("e-mail is not supported"),
            "constraint" | "nodelist" | "exclude" => self
                .ignore("nodes are chosen by the placement policy (GPU models: --gres=gpu:TYPE:N)"),
            "export" => o.export = Some(value.to_string()),
            "wrap" => o.wrap = Some(value.to_string()),
            "parsable" => o.parsable = Some(true),
            "test-only" => o.test_only = Some(true),
            "quiet" => o.quiet = Some(true),
            "open-mode" => match value {
                "append" | "a" => {}
                "truncate" | "t" => self.ignore(
                    "Gantry appends to a job's output files (a requeued run keeps the \
                     first run's lines); truncate is not applied",
                ),
                _ => return Err("give append or truncate".into()),
            },
            "hold" => o.hold = Some(true),
            "container-image" => o.image = Some(value.to_string()),
            "container-mounts" => {
                o.mounts = Some(gantry_api::model::ContainerMount::parse_list(value)?);
            }
            "begin" => o.begin_ms = Some(crate::begin_time::parse(value, &jiff::Zoned::now())?),
            _ => self.ignore("not supported by Gantry"),
        }
        Ok(())
    }
}
