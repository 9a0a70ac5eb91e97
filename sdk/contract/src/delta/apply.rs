//! Applying a delta: the list of this call from the previous one, `keep` and the fresh
//! elements, by moves. Used by the guest (`sdk/rust/src/wasm_delta.rs`) and by the host's
//! own copy of what it sent (`encoder.rs`).
//!
//! Owns [`apply`] and its checks. Does not own making deltas (`encoder.rs`).

use super::FRESH;

/// Rebuilds `list` from its previous value: `keep[i]` is the index of a kept element, or
/// [`FRESH`] for the next of `fresh`. Kept elements move; an index out of range or kept
/// twice, or a count of fresh elements that does not match, is an error (and `list` is
/// left empty: the caller asks for a full resend).
///
/// The prefix of elements kept where they were (`keep[i] == i`) stays in place, so a list
/// that only grew at its end, or changed near it, costs a comparison of integers per
/// element and moves only the tail. A tail whose kept elements keep their order (elements
/// removed and added, none reordered: the usual case) is rebuilt in the list itself, each
/// element moved at most twice.
pub fn apply<T: Default>(list: &mut Vec<T>, keep: &[u32], fresh: Vec<T>) -> Result<(), String> {
    let in_place = keep
        .iter()
        .zip(0..list.len())
        .take_while(|(k, i)| **k as usize == *i)
        .count();
    if in_order(&keep[in_place..], in_place, list.len(), fresh.len()) {
        apply_in_order(list, in_place, &keep[in_place..], fresh);
        return Ok(());
    }
    // Elements before `in_place` are taken by the prefix: a later `keep` naming one of
    // them keeps it twice, which `rebuild_tail` reports as out of range of the tail.
    let mut tail = list.split_off(in_place);
    match rebuild_tail(&mut tail, in_place, &keep[in_place..], fresh) {
        Ok(rebuilt) => {
            list.extend(rebuilt);
            Ok(())
        }
        Err(e) => {
            list.clear();
            Err(e)
        }
    }
}

/// The list after the in-place prefix: `old` holds the previous elements from index
/// `offset` on, `keep` the rest of the delta.
fn rebuild_tail<T: Default>(
    old: &mut [T],
    offset: usize,
    keep: &[u32],
    fresh: Vec<T>,
) -> Result<Vec<T>, String> {
    let mut taken = vec![false; old.len()];
    let mut fresh = fresh.into_iter();
    let mut out = Vec::with_capacity(keep.len());
    for &k in keep {
        if k == FRESH {
            match fresh.next() {
                Some(x) => out.push(x),
                None => return Err("a delta names more fresh elements than it carries".into()),
            }
            continue;
        }
        let j = (k as usize).wrapping_sub(offset);
        match taken.get_mut(j) {
            Some(t) if !*t => {
                *t = true;
                out.push(std::mem::take(&mut old[j]));
            }
            _ => {
                return Err(format!(
                    "a delta keeps element {k} of a previous list of {} (out of range or twice)",
                    offset + old.len()
                ));
            }
        }
    }
    if fresh.next().is_some() {
        return Err("a delta carries fresh elements it does not place".into());
    }
    Ok(out)
}

/// Whether `keep` (the delta after `offset` elements left in place) keeps elements of a
/// previous list of `old_len` in increasing order, each at most once and in range, and
/// names exactly `fresh` fresh elements.
fn in_order(keep: &[u32], offset: usize, old_len: usize, fresh: usize) -> bool {
    let mut next = offset;
    let mut fresh_named = 0;
    for &k in keep {
        if k == FRESH {
            fresh_named += 1;
        } else if (k as usize) < next || k as usize >= old_len {
            return false;
        } else {
            next = k as usize + 1;
        }
    }
    fresh_named == fresh
}

/// [`apply`] for a tail that [`in_order`] accepted: the kept elements are first packed
/// forward after the prefix (each source is at or after its target), then spread out to
/// their final places from the end (each target is at or after its source), with the
/// fresh ones put in the gaps.
fn apply_in_order<T: Default>(list: &mut Vec<T>, offset: usize, keep: &[u32], fresh: Vec<T>) {
    let mut packed = offset;
    for &k in keep.iter().filter(|&&k| k != FRESH) {
        let k = k as usize;
        if k != packed {
            list[packed] = std::mem::take(&mut list[k]);
        }
        packed += 1;
    }
    list.truncate(packed);
    list.resize_with(offset + keep.len(), T::default);
    let mut fresh = fresh.into_iter().rev();
    let mut source = packed;
    for (i, &k) in keep.iter().enumerate().rev() {
        let target = offset + i;
        if k == FRESH {
            // `in_order` counted exactly as many fresh elements as there are.
            list[target] = fresh.next().unwrap_or_default();
        } else {
            source -= 1;
            if source != target {
                list[target] = std::mem::take(&mut list[source]);
            }
        }
    }
}
