//! Tests of `unpack_bounds`: archives made with the system's `tar`, `gzip` and `zstd`.
#![allow(clippy::unwrap_used)]

use super::*;
use sha2::{Digest, Sha256};
use std::process::Command;

/// A layout's blob dir holding the output of `tar` run on a directory with `files` (name,
/// bytes; written sparse), through `compress` (`None`, `gzip`, `zstd`); returns its layer.
fn layer(layout: &Path, files: &[(&str, u64)], tar_flags: &[&str], compress: Option<&str>) -> Blob {
    let src = layout.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for (name, bytes) in files {
        let f = File::create(src.join(name)).unwrap();
        f.set_len(*bytes).unwrap();
    }
    let tar = layout.join("layer.tar");
    let out = Command::new("tar")
        .args(tar_flags)
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(&src)
        .arg(".")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let blob = match compress {
        Some(tool) => {
            let out = Command::new(tool).arg("-c").arg(&tar).output().unwrap();
            assert!(out.status.success(), "{out:?}");
            out.stdout
        }
        None => std::fs::read(&tar).unwrap(),
    };
    let hex = hex::encode(Sha256::digest(&blob));
    std::fs::create_dir_all(layout.join("blobs/sha256")).unwrap();
    std::fs::write(layout.join("blobs/sha256").join(&hex), &blob).unwrap();
    std::fs::remove_dir_all(&src).unwrap();
    Blob {
        digest: format!("sha256:{hex}"),
        size: blob.len() as u64,
        media_type: String::new(),
    }
}

const MIB: u64 = 1 << 20;

#[test]
fn a_small_layer_that_expands_past_the_bound_is_refused_before_unpacking() {
    for compress in [Some("gzip"), Some("zstd"), None] {
        let tmp = tempfile::tempdir().unwrap();
        let l = layer(
            tmp.path(),
            &[("zeros", 64 * MIB), ("small", 10)],
            &[],
            compress,
        );
        if compress.is_some() {
            assert!(l.size < MIB, "{compress:?} {}", l.size);
        }
        let err = unpacked_bytes(tmp.path(), std::slice::from_ref(&l), 16 * MIB, &[]).unwrap_err();
        assert!(
            matches!(err, MeasureError::Over { .. }),
            "{compress:?} {err}"
        );
        let bytes = unpacked_bytes(tmp.path(), &[l], 256 * MIB, &[]).unwrap();
        // 64 MiB, 4 KiB for `small`, 4 KiB for the directory.
        assert_eq!(bytes, 64 * MIB + 2 * BLOCK, "{compress:?}");
    }
}

#[test]
fn sparse_entries_are_refused_in_gnu_and_pax_archives() {
    for format in ["--format=gnu", "--format=pax"] {
        let tmp = tempfile::tempdir().unwrap();
        let l = layer(
            tmp.path(),
            &[("holes", 8 * MIB)],
            &["-S", format],
            Some("gzip"),
        );
        let err = unpacked_bytes(tmp.path(), &[l], 1 << 40, &[]).unwrap_err();
        assert!(matches!(err, MeasureError::Sparse(_)), "{format}: {err}");
    }
}

#[test]
fn pax_sizes_and_base256_sizes_are_read() {
    assert_eq!(header_size(b"00000001000\0"), Some(512));
    assert_eq!(header_size(b"           \0"), Some(0));
    let mut big = [0u8; 12];
    big[0] = 0x80;
    big[11] = 3;
    big[10] = 1;
    assert_eq!(header_size(&big), Some(259));
    assert_eq!(header_size(b"0000000x000\0"), None);
    let recs = pax_records(b"20 size=99999999999\n27 GNU.sparse.major=1\n");
    assert_eq!(recs[0], ("size".into(), "99999999999".into()));
    // A truncated archive is an error, not a pass.
    let tmp = tempfile::tempdir().unwrap();
    let l = layer(tmp.path(), &[("f", 4096)], &[], None);
    let path = blob_path(tmp.path(), &l.digest).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..1024 + 700]).unwrap();
    let err = unpacked_bytes(tmp.path(), &[l], 1 << 40, &[]).unwrap_err();
    assert!(matches!(err, MeasureError::Corrupt { .. }), "{err}");
    // A stream that ends right after its last entry's data (as umoci writes layers) is whole.
    let tmp = tempfile::tempdir().unwrap();
    let l = layer(tmp.path(), &[("f", 3)], &[], None);
    let path = blob_path(tmp.path(), &l.digest).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..1024 + 3]).unwrap();
    assert_eq!(
        unpacked_bytes(tmp.path(), &[l], 1 << 40, &[]).unwrap(),
        2 * BLOCK
    );
}
