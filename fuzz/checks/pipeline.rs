//! The check of fuzz target `pipeline` (and of the suite's corpus replay,
//! `host/gantry/tests/fuzz_corpus.rs`): feeds arbitrary text to the pipeline-file parser,
//! `gantry_config::pipeline_file::parse_pipeline_text` (the text half of `read_pipeline`, as TOML and as
//! JSON), then the result to `PipelineSpec`, and the bytes to the API's
//! `parse_json::<PipelineSpec>` (`PUT /v1/policy`). None may panic.
use gantry_policy::PipelineSpec;

/// Runs the check on one input; panics on a defect.
pub fn check(data: &[u8]) {
    let _ = gantry_server::api::parse_json::<PipelineSpec>(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for is_toml in [true, false] {
        if let Ok(value) = gantry_config::pipeline_file::parse_pipeline_text(text, is_toml, "fuzz")
            && let Ok(spec) = serde_json::from_value::<PipelineSpec>(value)
        {
            // What `policy show` and the store do with an accepted spec.
            let _ = serde_json::to_string(&spec);
        }
    }
}
