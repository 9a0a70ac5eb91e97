//! Fuzz target `pipeline`: feeds arbitrary text to the pipeline-file parser,
//! `gantry_config::pipeline_file::parse_pipeline_text` (the text half of `read_pipeline`, as TOML and as
//! JSON), then the result to `PipelineSpec`, and the bytes to the API's
//! `parse_json::<PipelineSpec>` (`PUT /v1/policy`). None may panic.
#![no_main]

use gantry_policy::PipelineSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
});
