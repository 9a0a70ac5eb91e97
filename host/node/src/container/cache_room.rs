//! Room in the image cache for an image about to be unpacked: its estimated size must fit
//! the cache's bound (`[containers] cache_max_mib`) and the share of the user whose task
//! brings it (`cache_max_mib_per_user`, counted over the images whose `.owner` is that user).
//! The least recently used images not in use (nor used in the last ten minutes) are removed
//! to make room, the user's own first; when that is not enough the image is refused with the
//! reason, and nothing else on the node's disk pays for it.
//!
//! Owns: that decision. Does not own the cache's files (`cache`) nor the estimate
//! (`unpack_bounds`).

use super::cache::{RECENT, remove_image, roots};
use std::fs;
use std::io;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The bounds an unpack must fit (bytes; 0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Room {
    pub total: u64,
    pub per_user: u64,
}

/// One unpacked image as the bounds see it.
#[derive(Debug)]
struct Entry {
    hex: String,
    bytes: u64,
    owner: Option<u32>,
    last_used_ms: u64,
    evictable: bool,
}

fn entries(cache_dir: &Path, runtime_state: &Path) -> io::Result<Vec<Entry>> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut out = Vec::new();
    for image in super::cache::list(cache_dir, runtime_state)? {
        let hex = image.digest.trim_start_matches("sha256:").to_string();
        let dir = roots(cache_dir).join(&hex);
        let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
        let bytes = read(".size").trim().parse().unwrap_or(image.size_mib << 20);
        let recent = now_ms.saturating_sub(image.last_used_ms) < RECENT.as_millis() as u64;
        out.push(Entry {
            hex,
            bytes,
            owner: read(".owner").trim().parse().ok(),
            last_used_ms: image.last_used_ms,
            evictable: !image.in_use && !recent,
        });
    }
    // Oldest first.
    out.sort_by_key(|e| e.last_used_ms);
    Ok(out)
}

/// Makes room for `need` bytes brought by `uid`'s task, removing least recently used images
/// not in use; returns the digests removed, or why the image cannot be unpacked here.
pub(crate) fn make_room(
    cache_dir: &Path,
    runtime_state: &Path,
    need: u64,
    uid: u32,
    room: Room,
) -> Result<Vec<String>, String> {
    const MIB: u64 = 1 << 20;
    let mib = |b: u64| b.div_ceil(MIB);
    if room.per_user != 0 && need > room.per_user {
        return Err(format!(
            "it needs {} MiB unpacked, more than a user's share of the image cache \
             ([containers] cache_max_mib_per_user = {})",
            mib(need),
            room.per_user / MIB
        ));
    }
    if room.total != 0 && need > room.total {
        return Err(format!(
            "it needs {} MiB unpacked, more than the whole image cache \
             ([containers] cache_max_mib = {})",
            mib(need),
            room.total / MIB
        ));
    }
    let mut all = entries(cache_dir, runtime_state)
        .map_err(|e| format!("cannot read the image cache: {e}"))?;
    let mut removed = Vec::new();
    let mut evict = |all: &mut Vec<Entry>, pick: &dyn Fn(&Entry) -> bool| -> bool {
        let Some(at) = all.iter().position(|e| e.evictable && pick(e)) else {
            return false;
        };
        let e = all.remove(at);
        match remove_image(cache_dir, &e.hex) {
            Ok(()) => removed.push(format!("sha256:{}", e.hex)),
            Err(err) => tracing::warn!(image = %e.hex, "cannot remove from the image cache: {err}"),
        }
        true
    };
    let mine = |all: &[Entry]| -> u64 {
        all.iter()
            .filter(|e| e.owner == Some(uid))
            .map(|e| e.bytes)
            .sum()
    };
    while room.per_user != 0 && mine(&all) + need > room.per_user {
        if !evict(&mut all, &|e| e.owner == Some(uid)) {
            return Err(format!(
                "{} MiB more would pass this user's share of the image cache \
                 ([containers] cache_max_mib_per_user = {}; {} MiB are this user's images \
                 in use or used in the last ten minutes)",
                mib(need),
                room.per_user / MIB,
                mib(mine(&all))
            ));
        }
    }
    let total = |all: &[Entry]| -> u64 { all.iter().map(|e| e.bytes).sum() };
    while room.total != 0 && total(&all) + need > room.total {
        if !evict(&mut all, &|_| true) {
            return Err(format!(
                "{} MiB more would pass the image cache's bound ([containers] cache_max_mib \
                 = {}; {} MiB are images in use or used in the last ten minutes)",
                mib(need),
                room.total / MIB,
                mib(total(&all))
            ));
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    const MIB: u64 = 1 << 20;

    fn image(cache: &Path, hex: &str, mib: u64, age_s: u64, owner: u32) {
        let dir = roots(cache).join(hex);
        fs::create_dir_all(dir.join("rootfs")).unwrap();
        fs::write(dir.join(".complete"), "").unwrap();
        fs::write(dir.join(".size"), (mib * MIB).to_string()).unwrap();
        fs::write(dir.join(".owner"), owner.to_string()).unwrap();
        let when = SystemTime::now() - Duration::from_secs(age_s);
        fs::File::options()
            .write(true)
            .open(dir.join(".complete"))
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[test]
    fn room_is_made_from_the_users_own_old_images_first_and_refused_past_the_bounds() {
        let tmp = tempfile::tempdir().unwrap();
        let (cache, state) = (tmp.path().join("c"), tmp.path().join("s"));
        image(&cache, "a1", 100, 7200, 1000);
        image(&cache, "b1", 100, 3600, 2000);
        image(&cache, "a2", 100, 1800, 1000);
        image(&cache, "a3", 100, 10, 1000);
        let room = Room {
            total: 1000 * MIB,
            per_user: 300 * MIB,
        };
        // User 1000 holds 300 MiB: its oldest goes, not user 2000's older one.
        let removed = make_room(&cache, &state, 50 * MIB, 1000, room).unwrap();
        assert_eq!(removed, ["sha256:a1"]);
        // Past the whole cache: anyone's oldest goes.
        let room = Room {
            total: 300 * MIB,
            per_user: 0,
        };
        let removed = make_room(&cache, &state, 150 * MIB, 2000, room).unwrap();
        assert_eq!(removed, ["sha256:b1", "sha256:a2"]);
        // What is left was used just now: refused, with the key named.
        let err = make_room(&cache, &state, 250 * MIB, 2000, room).unwrap_err();
        assert!(err.contains("cache_max_mib = 300"), "{err}");
        let err = make_room(&cache, &state, 400 * MIB, 2000, room).unwrap_err();
        assert!(err.contains("more than the whole image cache"), "{err}");
        let share = Room {
            total: 0,
            per_user: 10 * MIB,
        };
        let err = make_room(&cache, &state, 20 * MIB, 7, share).unwrap_err();
        assert!(err.contains("cache_max_mib_per_user = 10"), "{err}");
    }
}
