//! The views the API writes read back unchanged into the client's types of `gantry-api`
//! (`gantry_api::views`): a field renamed or added on one side only fails here, not in the
//! CLI.
//!
//! Owns these round-trip tests only.

#![allow(clippy::unwrap_used)]

use gantry_api::cluster::NodeLoad;
use gantry_api::model::{JobRecord, JobSpec};
use gantry_controller::jobs::Submitted;
use gantry_controller::node_control::{DrainRecord, GpuFault};
use gantry_controller::node_view::{GpuView, NodeView};
use gantry_controller::policy_ops::PluginInfo;
use gantry_node::inventory::MigDevice;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// `server` as JSON reads into `T` and writes back the same JSON.
fn round_trips<T: Serialize + DeserializeOwned>(server: &impl Serialize) {
    let sent = serde_json::to_value(server).unwrap();
    let read: T = serde_json::from_value(sent.clone()).unwrap();
    assert_eq!(serde_json::to_value(&read).unwrap(), sent);
}

fn spec() -> JobSpec {
    serde_json::from_value(serde_json::json!({"argv": ["true"]})).unwrap()
}

#[test]
fn a_node_view_reads_into_the_clients_type() {
    let gpu = GpuView {
        index: 1,
        model: "H100".into(),
        memory_mib: 80_000,
        healthy: false,
        health: Some(GpuFault {
            reason: "xid 79".into(),
            since_ms: 5,
        }),
        uuid: Some("GPU-1".into()),
        pci_bus_id: None,
        nvlink_peers: vec![0],
        mig_enabled: true,
        mig_devices: vec![MigDevice {
            parent_index: 1,
            uuid: "MIG-1".into(),
            profile: "1g.10gb".into(),
            name: "mig".into(),
            memory_mib: 10_000,
        }],
        allocated_milli: 500,
        jobs: vec![(7, 500)],
    };
    let node = NodeView {
        name: "n0".into(),
        state: "draining".into(),
        down_reason: Some("gone".into()),
        down_since_ms: Some(3),
        agent: "http://10.0.0.5:8421".into(),
        addr: "10.0.0.5".into(),
        last_heartbeat_ms: Some(9),
        load: Some(NodeLoad {
            load_1m: 0.5,
            memory_available_mib: 100,
        }),
        drain: Some(DrainRecord {
            reason: "maintenance".into(),
            by: "ops".into(),
            since_ms: 4,
        }),
        gpu_source: "config".into(),
        labels: [("gantry.io/gpu-groups".to_string(), "0-1".to_string())].into(),
        cpu_milli: 8000,
        cpu_milli_allocated: 1000,
        memory_mib: 64_000,
        memory_mib_allocated: 1024,
        gpus: vec![gpu],
        notes: vec!["a note".into()],
    };
    round_trips::<gantry_api::views::NodeView>(&node);
}

#[test]
fn a_submit_answer_reads_into_the_clients_type() {
    let one = Submitted {
        job: JobRecord::new(4, spec(), 10),
        array_job_ids: Vec::new(),
    };
    round_trips::<gantry_api::views::Submitted>(&one);
    let array = Submitted {
        job: JobRecord::new(4, spec(), 10),
        array_job_ids: vec![4, 5, 6],
    };
    round_trips::<gantry_api::views::Submitted>(&array);
}

#[test]
fn plugin_info_reads_into_the_clients_type() {
    let info = PluginInfo {
        sha256: "ab".repeat(32),
        metadata: gantry_contract::Metadata {
            name: "fifo".into(),
            version: "1.0.0".into(),
            contract: "0.1.0".into(),
            stages: vec![gantry_contract::Stage::Priority],
            config_hint: String::new(),
        },
        size_bytes: 1234,
    };
    round_trips::<gantry_api::views::PluginInfo>(&info);
}
