//! Unit tests of the scenario format: defaults, and each reason a scenario is refused.

use super::*;

const FULL: &str = r#"{
  "driver_version": "535.104.05",
  "devices": [
    {
      "name": "NVIDIA A100-SXM4-80GB",
      "uuid": "GPU-00000000-0000-0000-0000-000000000000",
      "pci_bus_id": "00000000:07:00.0",
      "memory_mib": 81920,
      "used_memory_mib": 1000,
      "nvlinks": ["00000000:08:00.0", null],
      "utilization": {"gpu": 40, "memory": 20},
      "processes": [{"pid": 1234, "used_memory_mib": 1000, "sm_util": 50, "mem_util": 10}],
      "ecc_uncorrected_volatile": 2,
      "retired_pages_pending": true,
      "remapped_rows": {"correctable": 1, "uncorrectable": 3, "pending": true, "failure": false},
      "lost": false,
      "mig": {"enabled": true, "devices": [
        {"profile": "1g.10gb", "uuid": "MIG-1", "memory_mib": 9856, "processes": []}
      ]}
    },
    {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-1", "memory_mib": 81920}
  ],
  "xid_events": [{"id": 1, "gpu": 0, "xid": 79}]
}"#;

fn refused(text: &str) -> String {
    match parse(text) {
        Ok(s) => panic!("accepted: {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn with_devices(devices: &str) -> String {
    format!(r#"{{"devices": [{devices}]}}"#)
}

#[test]
fn a_full_scenario_is_read() {
    let s = parse(FULL).expect("valid");
    assert_eq!(s.driver_version, "535.104.05");
    assert_eq!(s.devices.len(), 2);
    let g = &s.devices[0];
    assert_eq!(g.nvlinks, vec![Some("00000000:08:00.0".to_string()), None]);
    assert_eq!(
        g.utilization,
        Utilization {
            gpu: 40,
            memory: 20
        }
    );
    assert_eq!(g.processes[0].pid, 1234);
    assert_eq!(g.remapped_rows.uncorrectable, 3);
    assert!(g.retired_pages_pending);
    assert_eq!(g.mig_devices()[0].profile, "1g.10gb");
    assert_eq!(s.xid_events[0].xid, 79);
}

#[test]
fn optional_fields_have_defaults() {
    let s = parse(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1}, {"name": "G", "uuid": "GPU-b", "memory_mib": 1}"#,
    ))
    .expect("valid");
    assert_eq!(s.driver_version, DEFAULT_DRIVER_VERSION);
    assert!(s.xid_events.is_empty());
    let g = &s.devices[1];
    assert_eq!(g.pci_bus_id, "00000000:02:00.0");
    assert_eq!(g.used_memory_mib, 0);
    assert!(g.nvlinks.is_empty() && g.processes.is_empty());
    assert_eq!(g.remapped_rows, RemappedRows::default());
    assert!(!g.lost && g.mig.is_none());
    assert!(g.mig_devices().is_empty());
    assert_eq!(parse("{}").expect("empty is valid").devices.len(), 0);
}

#[test]
fn malformed_json_is_refused() {
    let msg = refused(r#"{"devices": [}"#);
    assert!(msg.starts_with("malformed scenario:"), "{msg}");
    assert!(msg.contains("line 1"), "{msg}");
}

#[test]
fn unknown_fields_are_refused_at_every_level() {
    let msg = refused(r#"{"gpus": []}"#);
    assert!(msg.contains("unknown field `gpus`"), "{msg}");
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "temp": 3}"#,
    ));
    assert!(msg.contains("unknown field `temp`"), "{msg}");
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "processes": [{"pid": 1, "cpu": 2}]}"#,
    ));
    assert!(msg.contains("unknown field `cpu`"), "{msg}");
}

#[test]
fn a_missing_required_field_is_refused() {
    let msg = refused(&with_devices(r#"{"name": "G", "uuid": "GPU-a"}"#));
    assert!(msg.contains("missing field `memory_mib`"), "{msg}");
}

#[test]
fn duplicate_uuids_are_refused() {
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1}, {"name": "G", "uuid": "GPU-a", "memory_mib": 1}"#,
    ));
    assert_eq!(
        msg,
        r#"devices[1].uuid: the uuid "GPU-a" is also the uuid of devices[0].uuid"#
    );
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "mig": {"enabled": true, "devices": [
            {"profile": "1g.5gb", "uuid": "MIG-x", "memory_mib": 1},
            {"profile": "1g.5gb", "uuid": "MIG-x", "memory_mib": 1}]}}"#,
    ));
    assert!(msg.starts_with("devices[0].mig.devices[1].uuid:"), "{msg}");
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "mig": {"enabled": true, "devices": [
            {"profile": "1g.5gb", "uuid": "GPU-a", "memory_mib": 1}]}}"#,
    ));
    assert!(msg.contains("also the uuid of devices[0].uuid"), "{msg}");
}

#[test]
fn an_xid_event_on_a_missing_gpu_is_refused() {
    let msg = refused(
        r#"{"devices": [{"name": "G", "uuid": "GPU-a", "memory_mib": 1}],
            "xid_events": [{"id": 1, "gpu": 0, "xid": 79}, {"id": 2, "gpu": 1, "xid": 79}]}"#,
    );
    assert_eq!(
        msg,
        "xid_events[1].gpu: GPU index 1 is out of range (the scenario has 1 devices)"
    );
}

#[test]
fn a_repeated_xid_event_id_is_refused() {
    let msg = refused(
        r#"{"devices": [{"name": "G", "uuid": "GPU-a", "memory_mib": 1}],
            "xid_events": [{"id": 7, "gpu": 0, "xid": 79}, {"id": 7, "gpu": 0, "xid": 48}]}"#,
    );
    assert!(msg.starts_with("xid_events[1].id:"), "{msg}");
}

#[test]
fn mig_devices_need_mig_mode_on() {
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "mig": {"enabled": false, "devices": [
            {"profile": "1g.5gb", "uuid": "MIG-x", "memory_mib": 1}]}}"#,
    ));
    assert!(msg.starts_with("devices[0].mig.devices:"), "{msg}");
    assert!(msg.contains("mig.enabled is false"), "{msg}");
}

#[test]
fn at_most_seven_mig_devices() {
    let migs: Vec<String> = (0..8)
        .map(|i| format!(r#"{{"profile": "1g.5gb", "uuid": "MIG-{i}", "memory_mib": 1}}"#))
        .collect();
    let msg = refused(&with_devices(&format!(
        r#"{{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "mig": {{"enabled": true, "devices": [{}]}}}}"#,
        migs.join(",")
    )));
    assert!(msg.contains("8 MIG devices, more than 7"), "{msg}");
}

#[test]
fn bus_ids_must_be_bus_ids() {
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "pci_bus_id": "07:00.0"}"#,
    ));
    assert!(msg.starts_with("devices[0].pci_bus_id:"), "{msg}");
    let msg = refused(&with_devices(
        r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "nvlinks": [null, "nope"]}"#,
    ));
    assert!(msg.starts_with("devices[0].nvlinks[1]:"), "{msg}");
    assert_eq!(parse_bus_id("00000000:07:00.0"), Some((0, 7, 0, 0)));
    assert_eq!(parse_bus_id("0001:AB:1f.7"), Some((1, 0xab, 0x1f, 7)));
    assert_eq!(parse_bus_id("0000:07:00.8"), None);
    assert_eq!(parse_bus_id("0000:07:00.0:1"), None);
}

#[test]
fn other_refusals_name_their_field() {
    let cases = [
        (
            r#"{"name": "G", "uuid": " ", "memory_mib": 1}"#,
            "devices[0].uuid: is empty",
        ),
        (
            r#"{"name": "G\u0000", "uuid": "GPU-a", "memory_mib": 1}"#,
            "devices[0].name: contains a NUL character",
        ),
        (
            r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "utilization": {"gpu": 101}}"#,
            "devices[0].utilization.gpu: 101 is over 100 (percent)",
        ),
        (
            r#"{"name": "G", "uuid": "GPU-a", "memory_mib": 1, "processes": [{"pid": 1, "sm_util": 200}]}"#,
            "devices[0].processes[0].sm_util: 200 is over 100 (percent)",
        ),
    ];
    for (device, want) in cases {
        assert_eq!(refused(&with_devices(device)), want);
    }
}

#[test]
fn a_missing_file_is_a_read_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = load(&dir.path().join("none.json")).expect_err("missing");
    assert!(matches!(err, ScenarioError::Read { .. }), "{err}");
    let path = dir.path().join("s.json");
    std::fs::write(&path, FULL).expect("write");
    assert_eq!(load(&path).expect("valid"), parse(FULL).expect("valid"));
}
