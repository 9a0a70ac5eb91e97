//! Reservations from expected ends, backfill that does not delay them, and the
//! options `conservative`, `window_s` and `max_jobs`. Times worked out by hand; now
//! is 1,000 s after the epoch, so `+20m` is `00:36:40Z`.

use super::*;
use gantry_sdk::ReasonCode;

/// n0 has 4 GPUs: job 100 holds GPU 0 until +10m, job 101 GPU 1 until +20m; 2 and 3
/// are free. Job 1 wants all 4 for 1 h; jobs 2-5 want one GPU each with limits of
/// 10m, 30m, none and 20m.
fn one_node() -> (Vec<Node>, Vec<RunningJob>, Vec<Job>) {
    let mut nodes = vec![node(0, 4)];
    let running = vec![
        run(&mut nodes, 100, 0, &[0], Some(600)),
        run(&mut nodes, 101, 0, &[1], Some(1200)),
    ];
    let jobs = vec![
        job(1, 1, 4, 3600),
        job(2, 1, 1, 600),
        job(3, 1, 1, 1800),
        job(4, 1, 1, 0),
        job(5, 1, 1, 1200),
    ];
    (nodes, running, jobs)
}

#[test]
fn the_blocked_job_is_reserved_when_enough_running_jobs_end() {
    let (nodes, running, jobs) = one_node();
    let plan = place("{}", &jobs, &nodes, &running);
    let r = reason(&plan, 1);
    assert_eq!(r.code, ReasonCode::InsufficientGpus);
    assert_eq!(
        r.message,
        "needs 4 GPUs of model any; 2 free of 4 (2 whole GPUs free); reserved to start at \
         +20m (1970-01-01T00:36:40Z) on node n0 when jobs 100, 101 end"
    );
}

#[test]
fn a_short_job_is_backfilled_because_it_ends_before_the_reservation() {
    let (nodes, running, jobs) = one_node();
    let plan = place("{}", &jobs, &nodes, &running);
    // Job 2 ends at +10m, job 5 exactly at the reserved +20m: both run now.
    assert_eq!(started(&plan), vec![2, 5]);
    assert_eq!(tasks_of(&plan, 2), vec![(0, vec![2])]);
    assert_eq!(tasks_of(&plan, 5), vec![(0, vec![3])]);
}

#[test]
fn a_job_that_would_delay_the_reservation_is_refused_and_says_whose() {
    let (nodes, running, jobs) = one_node();
    let plan = place("{}", &jobs, &nodes, &running);
    let r = reason(&plan, 3);
    assert_eq!(r.code, ReasonCode::BlockedByHigherPriority);
    assert_eq!(
        r.message,
        "fits now but would delay job 1's reserved start at +20m (1970-01-01T00:36:40Z): \
         with its time limit of 30m it would still hold resources reserved for job 1 then"
    );
}

#[test]
fn a_job_without_time_limit_is_not_backfilled_ahead_of_the_reservation() {
    let (nodes, running, jobs) = one_node();
    let plan = place("{}", &jobs, &nodes, &running);
    let r = reason(&plan, 4);
    assert_eq!(r.code, ReasonCode::BlockedByHigherPriority);
    assert!(
        r.message.starts_with(
            "has no time limit, so it cannot be backfilled: it fits now but would hold \
             resources job 1 needs at its reserved start at +20m"
        ),
        "{}",
        r.message
    );
}

#[test]
fn jobs_may_use_what_the_reserved_job_does_not_need_whatever_their_end() {
    // n1 (2 GPUs) cannot hold job 1, so its GPUs are free for anything.
    let (mut nodes, running, jobs) = one_node();
    nodes.push(node(1, 2));
    let plan = place("{}", &jobs, &nodes, &running);
    assert_eq!(started(&plan), vec![2, 3, 4, 5]);
    assert_eq!(tasks_of(&plan, 3), vec![(1, vec![0])]);
    assert_eq!(tasks_of(&plan, 4), vec![(1, vec![1])]);
    assert_eq!(tasks_of(&plan, 5), vec![(0, vec![3])]);
    assert!(reason(&plan, 1).message.contains("+20m"));
}

#[test]
fn no_reservation_beyond_the_window_so_nothing_is_protected() {
    let (nodes, running, jobs) = one_node();
    let plan = place(r#"{"window_s": 600}"#, &jobs, &nodes, &running);
    assert_eq!(
        reason(&plan, 1).message,
        "needs 4 GPUs of model any; 2 free of 4 (2 whole GPUs free); no start found \
         within the 10m planning window (window_s)"
    );
    assert_eq!(started(&plan), vec![2, 3]);
}

#[test]
fn running_jobs_without_time_limit_never_free_their_resources() {
    let mut nodes = vec![node(0, 4)];
    let running = vec![run(&mut nodes, 100, 0, &[0, 1, 2, 3], None)];
    let plan = place("{}", &[job(1, 1, 1, 60)], &nodes, &running);
    assert!(
        reason(&plan, 1).message.ends_with(
            "no start found within the 7d planning window (window_s); 1 running job(s) \
             have no time limit and never free their resources for planning"
        ),
        "{}",
        reason(&plan, 1).message
    );
}

#[test]
fn an_overdue_running_job_is_expected_to_end_now() {
    let mut nodes = vec![node(0, 2)];
    let mut late = run(&mut nodes, 100, 0, &[0, 1], Some(0));
    late.expected_end_ms = Some(NOW - 5_000);
    let plan = place("{}", &[job(1, 1, 2, 60)], &nodes, &[late]);
    assert!(
        reason(&plan, 1).message.ends_with(
            "reserved to start at +0s (1970-01-01T00:16:40Z) on node n0 when job 100 ends"
        ),
        "{}",
        reason(&plan, 1).message
    );
}

/// n0 (4 GPUs): job 100 on 0-1 until +10m, job 101 on 2-3 until +30m. n1 (3 GPUs):
/// job 102 on 0-1 until +20m, GPU 2 free. Job 1 wants 4 GPUs (reserved at +30m on
/// n0), job 2 wants 3 (at +20m on n1, the only node that holds 3 without touching
/// job 1's reservation), job 3 wants 1 GPU for 1 h.
fn two_reservations() -> (Vec<Node>, Vec<RunningJob>, Vec<Job>) {
    let mut nodes = vec![node(0, 4), node(1, 3)];
    let running = vec![
        run(&mut nodes, 100, 0, &[0, 1], Some(600)),
        run(&mut nodes, 101, 0, &[2, 3], Some(1800)),
        run(&mut nodes, 102, 1, &[0, 1], Some(1200)),
    ];
    let jobs = vec![job(1, 1, 4, 3600), job(2, 1, 3, 3600), job(3, 1, 1, 3600)];
    (nodes, running, jobs)
}

#[test]
fn conservative_two_reserves_the_second_blocked_job_too() {
    let (nodes, running, jobs) = two_reservations();
    let plan = place(r#"{"conservative": 2}"#, &jobs, &nodes, &running);
    assert!(started(&plan).is_empty(), "{plan:?}");
    assert!(
        reason(&plan, 1).message.ends_with(
            "reserved to start at +30m (1970-01-01T00:46:40Z) on node n0 when jobs 100, 101 end"
        ),
        "{}",
        reason(&plan, 1).message
    );
    assert!(
        reason(&plan, 2).message.ends_with(
            "reserved to start at +20m (1970-01-01T00:36:40Z) on node n1 when job 102 ends"
        ),
        "{}",
        reason(&plan, 2).message
    );
    assert!(
        reason(&plan, 3)
            .message
            .starts_with("fits now but would delay job 2's reserved start at +20m"),
        "{}",
        reason(&plan, 3).message
    );
}

#[test]
fn easy_reserves_only_the_first_blocked_job() {
    let (nodes, running, jobs) = two_reservations();
    let plan = place("{}", &jobs, &nodes, &running);
    // Job 3 runs on n1's free GPU: only job 1 (on n0) is protected.
    assert_eq!(started(&plan), vec![3]);
    assert_eq!(tasks_of(&plan, 3), vec![(1, vec![2])]);
    assert_eq!(
        reason(&plan, 2).message,
        "needs 3 GPUs of model any; 1 free of 7 (1 whole GPUs free); not reserved: this \
         cycle's 1 reservation(s) (conservative) went to higher-priority job(s) 1"
    );
}

#[test]
fn conservative_zero_reserves_nothing() {
    let (nodes, running, jobs) = one_node();
    let plan = place(r#"{"conservative": 0}"#, &jobs, &nodes, &running);
    assert_eq!(started(&plan), vec![2, 3]);
    assert_eq!(
        reason(&plan, 1).message,
        "needs 4 GPUs of model any; 2 free of 4 (2 whole GPUs free)"
    );
}

#[test]
fn max_jobs_leaves_the_rest_untested() {
    let nodes = vec![node(0, 8)];
    let jobs: Vec<Job> = (1..=4).map(|i| job(i, 1, 1, 60)).collect();
    let plan = place(r#"{"max_jobs": 2}"#, &jobs, &nodes, &[]);
    assert_eq!(started(&plan), vec![1, 2]);
    let r = reason(&plan, 4);
    assert_eq!(r.code, ReasonCode::Other);
    assert_eq!(
        r.message,
        "not tested this cycle: backfill examines at most 2 jobs per cycle (max_jobs) and \
         this job is number 4 in priority order"
    );
    assert_eq!(plan.pending.len(), 2);
}

#[test]
fn config_errors_name_the_key() {
    let mut p = Backfill::default();
    let err = p.configure(r#"{"conservatve": 2}"#).unwrap_err();
    assert!(err.contains("conservatve"), "{err}");
    let err = p.configure(r#"{"scoring": "tight"}"#).unwrap_err();
    assert!(err.contains("tight"), "{err}");
    let err = p.configure(r#"{"max_jobs": 0}"#).unwrap_err();
    assert!(err.contains("max_jobs"), "{err}");
    p.configure(r#"{"conservative": 3, "window_s": 60, "max_jobs": 5, "scoring": "spread"}"#)
        .unwrap();
    assert_eq!(p.metadata().name, "backfill");
}

#[test]
fn failed_searches_are_capped_per_cycle() {
    let mut nodes = vec![node(0, 4)];
    let running = vec![run(&mut nodes, 100, 0, &[0, 1, 2, 3], None)];
    // Distinct CPU requests: distinct shapes, so the memo does not answer for them.
    let jobs: Vec<Job> = (1..=34)
        .map(|i| {
            let mut j = job(i, 1, 1, 60);
            j.tasks[0].cpu_milli = 100 * i as u32;
            j
        })
        .collect();
    let plan = place("{}", &jobs, &nodes, &running);
    assert!(reason(&plan, 32).message.contains("no start found within"));
    assert!(
        reason(&plan, 33).message.ends_with(
            "not reserved: 32 reservation searches already found no start this cycle, so no \
             more are made"
        ),
        "{}",
        reason(&plan, 33).message
    );
}
