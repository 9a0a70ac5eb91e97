//! The check of fuzz target `sbatch` (and of the suite's corpus replay,
//! `host/gantry/tests/fuzz_corpus.rs`): feeds arbitrary text to the `#SBATCH` directive parser,
//! `gantry_cli::sbatch::parse`, as `gantry submit script.sh` does; on success, turns the options
//! into job-spec fields (`Options::spec_fields`, the task arithmetic) and requires that
//! what comes out is a `JobSpec` the API accepts as JSON (no unknown or mistyped field),
//! then runs `JobSpec::validate` on it. Nothing may panic; errors must name a line of the
//! input.
use gantry_api::model::JobSpec;

/// Runs the check on one input; panics on a defect.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = match gantry_cli::sbatch::parse(text) {
        Ok(p) => p,
        Err(e) => {
            assert!(
                e.line >= 1 && e.line <= text.lines().count(),
                "error names line {} of {}",
                e.line,
                text.lines().count()
            );
            let _ = e.located("fuzz.sh");
            return;
        }
    };
    for i in &parsed.ignored {
        assert!(i.line >= 1 && i.line <= text.lines().count());
        let _ = i.to_string();
    }
    let Ok(mut fields) = parsed.options.spec_fields() else {
        return;
    };
    fields.insert("script".into(), text.into());
    let value = serde_json::Value::Object(fields);
    let mut spec: JobSpec = match serde_json::from_value(value.clone()) {
        Ok(s) => s,
        Err(e) => panic!("spec_fields gave a job spec serde refuses ({e}): {value}"),
    };
    let _ = spec.validate();
}
