//! Room in the image cache for an image about to be unpacked: its estimated size must fit
//! the cache's bound (`[containers] cache_max_mib`) and the share of the user whose task
//! brings it (`cache_max_mib_per_user`, counted over the images whose `.owner` is that user).
//! The least recently used images not in use (nor used in the last ten minutes) are removed
//! to make room, the user's own first; when that is not enough the image is refused with the
//! reason, and nothing else on the node's disk pays for it. The room given is reserved
//! (`rootfs/.reserve-<hex>`, counted like an image of its user's until the unpack ends) under
//! a short lock (`rootfs/.room.lock`), so that tasks unpacking at once cannot each take the
//! same room.
//!
//! Owns: that decision. Does not own the cache's files (`cache`) nor the estimate
//! (`unpack_bounds`).

use super::cache::{RECENT, remove_image, roots};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A reservation older than this is a crashed shim's, not counted.
const STALE_RESERVATION: Duration = Duration::from_secs(6 * 3600);

/// Room reserved in the cache for an unpack under way; given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation(PathBuf);

impl Drop for Reservation {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// The reservations of unpacks under way (other than stale ones), as entries that cannot be
/// removed.
fn reservations(cache_dir: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    for e in fs::read_dir(roots(cache_dir))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(hex) = name.strip_prefix(".reserve-") else {
            continue;
        };
        let fresh = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < STALE_RESERVATION);
        let text = fs::read_to_string(e.path()).unwrap_or_default();
        let mut words = text.split_whitespace();
        let (Some(uid), Some(bytes)) = (words.next(), words.next()) else {
            continue;
        };
        if fresh {
            out.push(Entry {
                hex: hex.to_string(),
                bytes: bytes.parse().unwrap_or(0),
                owner: uid.parse().ok(),
                last_used_ms: u64::MAX,
                evictable: false,
            });
        }
    }
    out
}

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

/// Makes room for `need` bytes of the image `hex` brought by `uid`'s task, removing least
/// recently used images not in use, and reserves it until the [`Reservation`] is dropped;
/// returns the digests removed, or why the image cannot be unpacked here.
pub(crate) fn make_room(
    cache_dir: &Path,
    runtime_state: &Path,
    hex: &str,
    need: u64,
    uid: u32,
    room: Room,
) -> Result<(Vec<String>, Reservation), String> {
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
    let cache_err = |e: io::Error| format!("the image cache: {e}");
    fs::create_dir_all(roots(cache_dir)).map_err(cache_err)?;
    let lock = fs::File::create(roots(cache_dir).join(".room.lock")).map_err(cache_err)?;
    lock.lock().map_err(cache_err)?;
    let mut all = entries(cache_dir, runtime_state).map_err(cache_err)?;
    all.extend(reservations(cache_dir));
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
    let path = roots(cache_dir).join(format!(".reserve-{hex}"));
    fs::write(&path, format!("{uid} {need}\n")).map_err(cache_err)?;
    Ok((removed, Reservation(path)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MIB: u64 = 1 << 20;

    fn image(cache: &Path, hex: &str, mib: u64, age_s: u64, owner: u32) {
        let dir = super::super::cache::tests::image(cache, hex, mib, age_s);
        fs::write(dir.join(".owner"), owner.to_string()).unwrap();
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
        let (removed, reserved) = make_room(&cache, &state, "n1", 50 * MIB, 1000, room).unwrap();
        assert_eq!(removed, ["sha256:a1"]);
        drop(reserved);
        // Past the whole cache: anyone's oldest goes.
        let room = Room {
            total: 300 * MIB,
            per_user: 0,
        };
        let (removed, reserved) = make_room(&cache, &state, "n3", 150 * MIB, 2000, room).unwrap();
        assert_eq!(removed, ["sha256:b1", "sha256:a2"]);
        // What is left was used just now: refused, with the key named.
        let err = make_room(&cache, &state, "n4", 250 * MIB, 2000, room).unwrap_err();
        assert!(err.contains("cache_max_mib = 300"), "{err}");
        let err = make_room(&cache, &state, "n4", 400 * MIB, 2000, room).unwrap_err();
        assert!(err.contains("more than the whole image cache"), "{err}");
        let share = Room {
            total: 0,
            per_user: 10 * MIB,
        };
        let err = make_room(&cache, &state, "n5", 20 * MIB, 7, share).unwrap_err();
        assert!(err.contains("cache_max_mib_per_user = 10"), "{err}");
        // While n3's unpack is under way its 150 MiB are taken: 60 more do not fit beside
        // it and a3 (used just now), and fit once it ended.
        let err = make_room(&cache, &state, "n6", 60 * MIB, 2000, room).unwrap_err();
        assert!(err.contains("cache_max_mib = 300"), "{err}");
        drop(reserved);
        let (removed, _reserved) = make_room(&cache, &state, "n6", 60 * MIB, 2000, room).unwrap();
        assert!(removed.is_empty());
    }
}
