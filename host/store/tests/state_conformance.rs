//! One conformance suite for both active-state backends: every check runs on a store
//! whose state is in sled and on one whose state is in a real etcd cluster started for the
//! test (`gantry_store::test_etcd`, three members). Then what only etcd does: fencing, the
//! election, a member lost, every member lost and back. A machine without etcd fails the
//! etcd run, saying what to install.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_api::model::{ArrayMember, JobRecord, JobSpec, JobState};
use gantry_store::election::{Election, LeaderInfo};
use gantry_store::etcd::Etcd;
use gantry_store::test_etcd::TestEtcd;
use gantry_store::{HistoryBackend, JobIndex, StateBackend, Store, StoreError};
use std::time::{Duration, Instant};

fn job(id: u64, user: &str, state: JobState, end_ms: Option<u64>) -> JobRecord {
    let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    spec.user = user.into();
    let mut j = JobRecord::new(id, spec, id);
    j.state = state;
    j.end_ms = end_ms;
    j
}

fn ids(it: impl Iterator<Item = u64>) -> Vec<u64> {
    it.collect()
}

/// Opens a store over `state` with a history of its own in `dir`.
fn open(dir: &std::path::Path, state: &StateBackend) -> Store {
    Store::open_with(dir, 4, state, &HistoryBackend::Sqlite).unwrap()
}

fn job_index_follows_each_write(st: &Store) {
    st.put_job(&job(1, "ann", JobState::Pending, None)).unwrap();
    st.put_new_job(&job(2, "bob", JobState::Running, None))
        .unwrap();
    st.put_new_job(&job(3, "ann", JobState::Running, None))
        .unwrap();
    // A "new" job that is stored already is replaced, its index keys with it.
    st.put_new_job(&job(3, "ann", JobState::Pending, None))
        .unwrap();
    assert_eq!(
        ids(st.ids_newest_first(Some((JobIndex::State, "running")), None)),
        [2]
    );
    let active: Vec<u64> = st.active_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(active, [1, 2, 3]);
    st.put_job(&job(1, "ann", JobState::Failed, Some(500)))
        .unwrap();
    assert_eq!(
        ids(st.ids_newest_first(Some((JobIndex::State, "pending")), None)),
        [3]
    );
    assert_eq!(
        ids(st.ids_newest_first(Some((JobIndex::State, "failed")), None)),
        [1]
    );
    assert_eq!(st.ended_before(501, 10).unwrap(), [(500, 1)]);
    assert!(st.ended_before(500, 10).unwrap().is_empty());
    assert_eq!(st.ended_since(400).unwrap()[0].id, 1);
    assert_eq!(
        ids(st.ids_newest_first(Some((JobIndex::User, "ann")), None)),
        [3, 1]
    );
    assert_eq!(
        ids(st.ids_newest_first(Some((JobIndex::User, "ann")), Some(3))),
        [1]
    );
    assert_eq!(ids(st.ids_newest_first(None, None)), [3, 2, 1]);
    let mut member = job(4, "cat", JobState::Pending, None);
    member.array = Some(ArrayMember {
        array_id: 4,
        index: 0,
        max_running: None,
        count: 0,
        min: 0,
        max: 0,
    });
    st.put_job(&member).unwrap();
    assert_eq!(st.array_member_ids(4).unwrap(), [4]);
    st.delete_job(4).unwrap();
    assert!(st.job(4).unwrap().is_none());
    assert!(st.array_member_ids(4).unwrap().is_empty());
    assert_eq!(st.job_count().unwrap(), 3);
    assert_eq!(st.job(2).unwrap().unwrap().spec.user, "bob");
}

fn long_lists_are_walked_to_the_end(st: &Store) {
    for id in 100..1300 {
        st.put_job(&job(
            id,
            if id % 3 == 0 { "x" } else { "y" },
            JobState::Pending,
            None,
        ))
        .unwrap();
    }
    let all = ids(st.ids_newest_first(None, None));
    assert_eq!(all.len(), 1200);
    assert_eq!((all[0], all[1199]), (1299, 100));
    let x = ids(st.ids_newest_first(Some((JobIndex::User, "x")), None));
    assert_eq!(x.len(), 400);
    assert!(x.windows(2).all(|w| w[0] > w[1]));
}

fn counters_never_repeat_under_concurrent_callers(st: &Store) {
    assert_eq!(st.next_id("c").unwrap(), 1);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let st = st.clone();
            std::thread::spawn(move || {
                (0..25)
                    .map(|_| st.next_id("c").unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (2..=101).collect::<Vec<_>>());
}

fn plugins_pipelines_meta_services_and_the_outbox(st: &Store) {
    let small = vec![7u8; 1000];
    let large: Vec<u8> = (0..2_500_000u32).map(|i| (i % 251) as u8).collect();
    st.put_plugin("aa", &small).unwrap();
    st.put_plugin("bb", &large).unwrap();
    assert_eq!(st.plugin("aa").unwrap().unwrap(), small);
    assert_eq!(st.plugin("bb").unwrap().unwrap(), large);
    assert_eq!(st.plugin("cc").unwrap(), None);
    assert_eq!(st.plugin_shas().unwrap(), ["aa", "bb"]);
    st.put_pipeline(2, &"two").unwrap();
    st.put_pipeline(1, &"one").unwrap();
    assert_eq!(st.pipelines::<String>().unwrap(), ["one", "two"]);
    st.set_meta("k", &vec![1, 2]).unwrap();
    assert_eq!(st.meta::<Vec<u32>>("k").unwrap(), Some(vec![1, 2]));
    assert_eq!(st.meta::<u32>("none").unwrap(), None);
    assert!(st.services().unwrap().is_empty());
    assert!(!st.has_queued_accounting().unwrap());
}

/// One check of the suite, by name.
type Check = (&'static str, fn(&Store));

const CHECKS: [Check; 4] = [
    ("jobs", job_index_follows_each_write),
    ("long lists", long_lists_are_walked_to_the_end),
    ("counters", counters_never_repeat_under_concurrent_callers),
    (
        "small tables",
        plugins_pipelines_meta_services_and_the_outbox,
    ),
];

#[test]
fn sled_state_passes_the_conformance_suite() {
    for (name, check) in CHECKS {
        eprintln!("sled: {name}");
        let dir = tempfile::tempdir().unwrap();
        check(&open(dir.path(), &StateBackend::Sled));
    }
}

#[test]
fn etcd_state_passes_the_conformance_suite_and_outlives_its_controller() {
    let cluster = TestEtcd::start(3).unwrap();
    for (i, (name, check)) in CHECKS.into_iter().enumerate() {
        eprintln!("etcd: {name}");
        let dir = tempfile::tempdir().unwrap();
        check(&open(
            dir.path(),
            &StateBackend::Etcd(cluster.config(&format!("/c{i}/"))),
        ));
    }
    // Another controller, with another disk, sees the same state.
    let elsewhere = tempfile::tempdir().unwrap();
    let st = open(
        elsewhere.path(),
        &StateBackend::Etcd(cluster.config("/c0/")),
    );
    assert_eq!(ids(st.ids_newest_first(None, None)), [3, 2, 1]);
    assert_eq!(st.state_backend(), "etcd");
    // A counter numbers on past every block the first controller reserved (1..=101 handed
    // out, in blocks of COUNTER_BLOCK).
    let third = tempfile::tempdir().unwrap();
    let counters = open(third.path(), &StateBackend::Etcd(cluster.config("/c2/")));
    let next = counters.next_id("c").unwrap();
    let blocks = 101_u64.div_ceil(gantry_store::COUNTER_BLOCK);
    assert_eq!(next, blocks * gantry_store::COUNTER_BLOCK + 1);
    assert_eq!(counters.next_id("c").unwrap(), next + 1);
}

fn info(name: &str) -> LeaderInfo {
    LeaderInfo {
        name: name.into(),
        url: format!("http://{name}"),
        since_ms: 1,
    }
}

#[test]
fn one_controller_leads_and_a_deposed_one_cannot_write() {
    let cluster = TestEtcd::start(1).unwrap();
    let config = cluster.config("/g/");
    let client = Etcd::new(&config).unwrap();
    let election = Election::new(client.clone(), "/g/", 2);
    let a = election
        .campaign(info("a"))
        .unwrap()
        .expect("the first campaign wins");
    assert!(
        election.campaign(info("b")).unwrap().is_none(),
        "one leader at a time"
    );
    let leader = election.leader().unwrap().unwrap();
    assert_eq!((leader.info.name.as_str(), leader.term), ("a", a.term));
    assert!(election.renew(&a).unwrap());

    let dir = tempfile::tempdir().unwrap();
    let store_a = open(dir.path(), &StateBackend::Etcd(config.clone()));
    store_a.set_fence(Some(election.fence(&a)));
    store_a
        .put_job(&job(1, "ann", JobState::Pending, None))
        .unwrap();

    // a stops renewing (paused): its lease ends, b wins a later term.
    let deadline = Instant::now() + Duration::from_secs(20);
    let b = loop {
        if let Some(b) = election.campaign(info("b")).unwrap() {
            break b;
        }
        assert!(Instant::now() < deadline, "a's lease never ended");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(b.term > a.term, "terms only grow");
    assert!(!election.renew(&a).unwrap(), "a learns its term is over");
    // Everything a writes now is refused by etcd itself.
    let refused = store_a.put_job(&job(2, "ann", JobState::Pending, None));
    assert!(
        matches!(refused, Err(StoreError::Fenced { term }) if term == a.term),
        "{refused:?}"
    );
    assert!(matches!(
        store_a.next_id("jobs"),
        Err(StoreError::Fenced { .. })
    ));
    let other = tempfile::tempdir().unwrap();
    let store_b = open(other.path(), &StateBackend::Etcd(config));
    store_b.set_fence(Some(election.fence(&b)));
    store_b
        .put_job(&job(3, "bob", JobState::Pending, None))
        .unwrap();
    assert_eq!(ids(store_b.ids_newest_first(None, None)), [3, 1]);
    election.resign(&b).unwrap();
    assert!(
        election.leader().unwrap().is_none(),
        "a resignation frees the key at once"
    );
}

#[test]
fn a_lost_member_changes_nothing_and_a_lost_cluster_is_an_error_until_it_returns() {
    let mut cluster = TestEtcd::start(3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let st = open(dir.path(), &StateBackend::Etcd(cluster.config("/q/")));
    st.put_job(&job(1, "ann", JobState::Pending, None)).unwrap();
    cluster.kill(0);
    for id in 2..20 {
        st.put_job(&job(id, "ann", JobState::Pending, None))
            .unwrap();
    }
    assert_eq!(st.active_jobs().unwrap().len(), 19);
    cluster.kill(1);
    cluster.kill(2);
    let err = st
        .put_job(&job(30, "ann", JobState::Pending, None))
        .expect_err("no member answers")
        .to_string();
    assert!(err.contains("etcd (http://127.0.0.1:"), "{err}");
    for i in 0..3 {
        cluster.restart(i).unwrap();
    }
    cluster.wait_ready().unwrap();
    st.put_job(&job(30, "ann", JobState::Pending, None))
        .unwrap();
    assert_eq!(st.active_jobs().unwrap().len(), 20);
}
