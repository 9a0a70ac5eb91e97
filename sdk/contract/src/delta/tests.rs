//! Random sequences of lists through the host's encoder and the guest's `apply`: the guest
//! always ends with this call's list (symbols re-numbered), whatever changed.

use super::*;
use crate::types::{Label, TaskGroup};

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

fn job(id: u64, rng: &mut Lcg, strings: usize) -> Job {
    let s = |rng: &mut Lcg| rng.below(strings as u64) as u32;
    Job {
        id,
        name: s(rng),
        user: s(rng),
        account: s(rng),
        queue: s(rng),
        tier: rng.below(3) as i32,
        submit_ms: id * 10,
        labels: vec![Label {
            key: s(rng),
            value: s(rng),
        }],
        tasks: vec![TaskGroup {
            count: 1,
            gpus: 1 + rng.below(4) as u32,
            ..TaskGroup::default()
        }],
        ..Job::default()
    }
}

/// Symbols into a fixed vocabulary re-numbered as a cycle's own table would number them:
/// the vocabulary rotated by `r`, so the same text has another symbol in each call.
fn this_call(jobs: &[Job], r: usize, n: usize) -> (Vec<String>, Vec<Job>) {
    let texts: Vec<String> = (0..n).map(|i| format!("s{}", (i + r) % n)).collect();
    let at = |s: u32| ((s as usize + n - r) % n) as u32;
    let jobs = jobs
        .iter()
        .map(|j| {
            let mut j = j.clone();
            for s in [&mut j.name, &mut j.user, &mut j.account, &mut j.queue] {
                *s = at(*s);
            }
            for l in &mut j.labels {
                (l.key, l.value) = (at(l.key), at(l.value));
            }
            j
        })
        .collect();
    (texts, jobs)
}

#[test]
fn random_changes_reach_the_guest_exactly() {
    const WORDS: usize = 12;
    let mut rng = Lcg(7);
    let mut table = StringTable::default();
    let mut host: Encoder<Job> = Encoder::default();
    let mut guest: Vec<Job> = Vec::new();
    let mut guest_strings: Vec<String> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut next_id = 1;
    let mut kept_total = 0;
    for call in 0..300 {
        // Change the list: drop some, add some, change one, swap two.
        jobs.retain(|_| rng.below(10) != 0);
        for _ in 0..rng.below(6) {
            jobs.push(job(next_id, &mut rng, WORDS));
            next_id += 1;
        }
        if let Some(j) = jobs.first_mut() {
            j.tier += 1;
        }
        if jobs.len() > 2 && rng.below(3) == 0 {
            let (a, b) = (rng.below(jobs.len() as u64), rng.below(jobs.len() as u64));
            jobs.swap(a as usize, b as usize);
        }
        let (texts, sent) = this_call(&jobs, rng.below(WORDS as u64) as usize, WORDS);
        let (tr, added) = table.translate(&texts, 0);
        let (keep, fresh) = host.encode(&sent, &tr);
        kept_total += keep.iter().filter(|k| **k != FRESH).count();
        // The guest.
        guest_strings.extend(added);
        apply(&mut guest, &keep, fresh.clone()).unwrap();
        host.commit(&keep, fresh).unwrap();
        assert_eq!(guest.len(), jobs.len(), "call {call}");
        for (g, j) in guest.iter().zip(&jobs) {
            assert_eq!(g.id, j.id);
            let text = |s: u32| guest_strings[s as usize].clone();
            assert_eq!(text(g.user), format!("s{}", j.user), "call {call}");
            assert_eq!(text(g.labels[0].value), format!("s{}", j.labels[0].value));
            assert_eq!(g.tier, j.tier);
            assert_eq!(g.tasks, j.tasks);
        }
    }
    assert_eq!(guest_strings.len(), WORDS, "each text is sent once");
    assert!(
        kept_total > 1000,
        "most elements travel as `keep`: {kept_total}"
    );
}

#[test]
fn a_bad_delta_is_an_error_and_empties_the_list() {
    let mut list = vec![Job::default(), Job::default()];
    assert!(apply(&mut list, &[0, 0], Vec::new()).is_err());
    assert!(list.is_empty());
    let mut list = vec![Job::default()];
    assert!(apply(&mut list, &[5], Vec::new()).is_err());
    let mut list = vec![Job::default()];
    assert!(apply(&mut list, &[FRESH], Vec::new()).is_err());
    let mut list = vec![Job::default()];
    assert!(apply(&mut list, &[0], vec![Job::default()]).is_err());
    let mut list = vec![Job {
        id: 3,
        ..Job::default()
    }];
    apply(
        &mut list,
        &[FRESH, 0],
        vec![Job {
            id: 9,
            ..Job::default()
        }],
    )
    .unwrap();
    assert_eq!(list.iter().map(|j| j.id).collect::<Vec<_>>(), [9, 3]);
}

#[test]
fn an_unchanged_list_is_all_keep_and_a_changed_symbol_text_is_fresh() {
    let mut table = StringTable::default();
    let mut host: Encoder<Job> = Encoder::default();
    let texts: Vec<String> = vec!["alice".into(), "bob".into()];
    let jobs = vec![Job {
        id: 1,
        user: 0,
        name: 1,
        account: 1,
        queue: 1,
        ..Job::default()
    }];
    let (tr, _) = table.translate(&texts, 0);
    let (keep, fresh) = host.encode(&jobs, &tr);
    host.commit(&keep, fresh).unwrap();
    // Same text under another symbol: kept.
    let (tr, added) = table.translate(&["bob".to_string(), "alice".to_string()], 0);
    assert!(added.is_empty());
    let moved = vec![Job {
        id: 1,
        user: 1,
        ..Job::default()
    }];
    let (keep, fresh) = host.encode(&moved, &tr);
    assert_eq!((keep.as_slice(), fresh.len()), (&[0][..], 0));
    host.commit(&keep, fresh).unwrap();
    // Another user: fresh.
    let other = vec![Job {
        id: 1,
        user: 0,
        name: 0,
        ..Job::default()
    }];
    let (keep, fresh) = host.encode(&other, &tr);
    assert_eq!((keep.as_slice(), fresh.len()), (&[FRESH][..], 1));
}

#[test]
fn an_unchanged_prefix_stays_and_the_tail_is_rebuilt() {
    let ids = |l: &[Job]| l.iter().map(|j| j.id).collect::<Vec<_>>();
    let j = |id| Job {
        id,
        ..Job::default()
    };
    // Grown at the end (a fill replay's running list).
    let mut list = vec![j(1), j(2), j(3)];
    apply(&mut list, &[0, 1, 2, FRESH], vec![j(4)]).unwrap();
    assert_eq!(ids(&list), [1, 2, 3, 4]);
    // Prefix in place, then a swap, a drop and a fresh one.
    apply(&mut list, &[0, 3, 1, FRESH], vec![j(5)]).unwrap();
    assert_eq!(ids(&list), [1, 4, 2, 5]);
    // Shrunk to a prefix.
    apply(&mut list, &[0, 1], Vec::new()).unwrap();
    assert_eq!(ids(&list), [1, 4]);
    // A tail keeping an element of the prefix again is refused.
    assert!(apply(&mut list, &[0, 1, 0], Vec::new()).is_err());
    assert!(list.is_empty());
}

#[test]
fn a_numbered_element_seen_again_with_its_number_is_kept_without_comparing() {
    let mut table = StringTable::default();
    let (tr, _) = table.translate(&["a".to_string()], 0);
    let mut host: Encoder<RunningJob> = Encoder::default();
    let running = |id, start_ms, revision| RunningJob {
        job: Job {
            id,
            ..Job::default()
        },
        start_ms,
        revision,
        ..RunningJob::default()
    };
    let first = vec![running(1, 10, 7), running(2, 20, 0)];
    let (keep, fresh) = host.encode(&first, &tr);
    assert_eq!(fresh.len(), 2);
    host.commit(&keep, fresh).unwrap();
    // Same numbers: kept, whatever the fields say (the producer vouches for them). The
    // unnumbered one is compared field by field: changed, so fresh.
    let (keep, fresh) = host.encode(&[running(1, 99, 7), running(2, 21, 0)], &tr);
    assert_eq!(keep, [0, FRESH]);
    host.commit(&keep, fresh).unwrap();
    // A new number for unchanged fields: compared, and kept.
    let (keep, fresh) = host.encode(&[running(1, 10, 8), running(2, 21, 0)], &tr);
    assert_eq!((keep.as_slice(), fresh.len()), (&[0, 1][..], 0));
    // A new number for changed fields: fresh.
    let (keep, _) = host.encode(&[running(1, 11, 9)], &tr);
    assert_eq!(keep, [FRESH]);
}

#[test]
fn a_numbered_pending_job_seen_again_with_its_number_is_kept_without_comparing() {
    let mut table = StringTable::default();
    let (tr, _) = table.translate(&["a".to_string()], 0);
    let mut host: Encoder<Job> = Encoder::default();
    let job = |id, tier, revision| Job {
        id,
        tier,
        revision,
        ..Job::default()
    };
    let (keep, fresh) = host.encode(&[job(1, 0, 5), job(2, 0, 0)], &tr);
    host.commit(&keep, fresh).unwrap();
    let (keep, fresh) = host.encode(&[job(1, 3, 5), job(2, 3, 0)], &tr);
    assert_eq!(
        keep,
        [0, FRESH],
        "the number vouches; the unnumbered is compared"
    );
    host.commit(&keep, fresh).unwrap();
    // Another job with the number of the kept one is still another job.
    let (keep, _) = host.encode(&[job(3, 0, 5), job(2, 3, 0)], &tr);
    assert_eq!(keep[0], FRESH);
}

#[test]
fn a_table_of_one_lineage_is_translated_from_where_it_grew() {
    let texts = |n: usize| (0..n).map(|i| format!("s{i}")).collect::<Vec<String>>();
    let mut grown = StringTable::default();
    let mut compared = StringTable::default();
    for n in [3, 5, 5, 9] {
        let a = grown.translate(&texts(n), 42);
        let b = compared.translate(&texts(n), 0);
        assert_eq!(
            a, b,
            "a table that only grew translates the same either way"
        );
    }
    // Another lineage (a new table) is compared: a changed string is found.
    let mut other = texts(9);
    other[1] = "x".into();
    let (tr, added) = grown.translate(&other, 43);
    assert_eq!(added, ["x"]);
    assert_eq!(tr[1], 9);
    // The same lineage vouches for what it had: a shrunk table is compared anyway.
    let (tr, added) = grown.translate(&texts(2), 43);
    assert!(added.is_empty());
    assert_eq!(tr, [0, 1]);
}

#[test]
fn removals_and_additions_in_order_and_reorders_give_the_described_list() {
    let mut rng = Lcg(11);
    for round in 0..2000 {
        let old: Vec<u64> = (0..rng.below(12)).map(|i| 100 + i).collect();
        // Keep each element with probability 3/4, add fresh ones anywhere, sometimes swap
        // two kept ones (out of order: the general path).
        let mut keep: Vec<u32> = Vec::new();
        let mut fresh = Vec::new();
        for i in 0..old.len() as u32 {
            while rng.below(4) == 0 {
                keep.push(FRESH);
                fresh.push(1000 + fresh.len() as u64);
            }
            if rng.below(4) != 0 {
                keep.push(i);
            }
        }
        if rng.below(5) == 0 {
            keep.push(FRESH);
            fresh.push(1000 + fresh.len() as u64);
        }
        if rng.below(6) == 0 && keep.len() >= 2 {
            let (a, b) = (
                rng.below(keep.len() as u64) as usize,
                rng.below(keep.len() as u64) as usize,
            );
            keep.swap(a, b);
        }
        let mut next_fresh = fresh.iter();
        let expected: Vec<u64> = keep
            .iter()
            .map(|&k| match k {
                FRESH => *next_fresh.next().unwrap(),
                k => old[k as usize],
            })
            .collect();
        let mut list = old.clone();
        apply(&mut list, &keep, fresh).unwrap();
        assert_eq!(list, expected, "round {round}: old {old:?} keep {keep:?}");
    }
}

#[test]
fn insertions_anywhere_keep_every_unchanged_element_and_send_only_the_rest() {
    let mut rng = Lcg(23);
    let tr: Vec<Symbol> = (0..4).collect();
    let job = |id: u64, tier: i32| Job {
        id,
        tier,
        ..Job::default()
    };
    for round in 0..400 {
        let mut host: Encoder<Job> = Encoder::default();
        let mut guest: Vec<Job> = Vec::new();
        let mut list: Vec<Job> = (0..rng.below(120)).map(|i| job(i + 1, 0)).collect();
        let mut next_id = 1000;
        let (keep, fresh) = host.encode(&list, &tr);
        apply(&mut guest, &keep, fresh.clone()).unwrap();
        host.commit(&keep, fresh).unwrap();
        for call in 0..6 {
            let before: Vec<Job> = list.clone();
            match rng.below(6) {
                // New elements one by one at random places, or in a block.
                0 | 1 => {
                    for _ in 0..1 + rng.below(8) {
                        let at = rng.below(list.len() as u64 + 1) as usize;
                        list.insert(at, job(next_id, 0));
                        next_id += 1;
                    }
                }
                2 => {
                    let at = rng.below(list.len() as u64 + 1) as usize;
                    for k in 0..rng.below(12) {
                        list.insert(at, job(next_id + k, 0));
                    }
                    next_id += 12;
                }
                // A run of removals, with new elements after it.
                3 if !list.is_empty() => {
                    let at = rng.below(list.len() as u64) as usize;
                    let n = (1 + rng.below(10) as usize).min(list.len() - at);
                    list.drain(at..at + n);
                    let at = rng.below(list.len() as u64 + 1) as usize;
                    list.insert(at, job(next_id, 0));
                    next_id += 1;
                }
                // Changed and moved elements.
                _ => {
                    for _ in 0..rng.below(4) {
                        if list.len() > 1 {
                            let (a, b) = (
                                rng.below(list.len() as u64) as usize,
                                rng.below(list.len() as u64) as usize,
                            );
                            list.swap(a, b);
                            list[a].tier += 1;
                        }
                    }
                }
            }
            let (keep, fresh) = host.encode(&list, &tr);
            let unchanged = list
                .iter()
                .filter(|x| before.iter().any(|b| b.id == x.id && b.tier == x.tier))
                .count();
            let kept = keep.iter().filter(|k| **k != FRESH).count();
            assert_eq!(
                kept, unchanged,
                "round {round} call {call}: every unchanged element is kept"
            );
            assert_eq!(fresh.len(), list.len() - unchanged);
            apply(&mut guest, &keep, fresh.clone()).unwrap();
            host.commit(&keep, fresh).unwrap();
            assert_eq!(guest, list, "round {round} call {call}");
        }
    }
}
