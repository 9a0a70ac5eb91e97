//! A job's container image and mounts (`gantry submit --image IMAGE --mount SRC:DST[:ro]`,
//! `#SBATCH --container-image` / `--container-mounts`): their syntax and limits.
//!
//! Owns: what a well-formed image reference and mount look like. Does not own which
//! mounts or image directories a node allows (the daemon's `[containers]` settings,
//! `gantry_node::container`), nor pulling or running anything.

use super::{FieldError, MAX_PATH, bad};
use serde::{Deserialize, Serialize};

/// Most mounts of one job.
pub const MAX_MOUNTS: usize = 32;
/// Longest image reference.
pub const MAX_IMAGE_REF: usize = 512;

/// A host directory or file made visible inside a job's container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ContainerMount {
    /// Absolute path on the node; must lie under one of the node's `[containers]
    /// allowed_mounts`.
    #[cfg_attr(feature = "openapi", schema(max_length = 4096))]
    pub source: String,
    /// Absolute path inside the container.
    #[cfg_attr(feature = "openapi", schema(max_length = 4096))]
    pub destination: String,
    /// Mounted read-only.
    #[serde(default)]
    pub read_only: bool,
}

impl ContainerMount {
    /// Parses Pyxis' form `SRC[:DST][:ro|rw]` (one mount; `DST` defaults to `SRC`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split(':').collect();
        let (source, destination, flag) = match parts.as_slice() {
            [src] => (*src, *src, None),
            [src, f @ ("ro" | "rw")] => (*src, *src, Some(*f)),
            [src, dst] => (*src, *dst, None),
            [src, dst, f] => (*src, *dst, Some(*f)),
            _ => return Err(format!("`{text}` is not SRC[:DST][:ro]")),
        };
        let read_only = match flag {
            None | Some("rw") => false,
            Some("ro") => true,
            Some(other) => return Err(format!("`{other}` in `{text}` is neither ro nor rw")),
        };
        Ok(Self {
            source: source.to_string(),
            destination: destination.to_string(),
            read_only,
        })
    }

    /// Parses a comma-separated list (`--container-mounts=/a:/a,/b:/data:ro`).
    pub fn parse_list(text: &str) -> Result<Vec<Self>, String> {
        text.split(',')
            .filter(|m| !m.trim().is_empty())
            .map(|m| Self::parse(m.trim()))
            .collect()
    }
}

/// A clean absolute path: starts with `/`, no `..` or `.` component, no control character.
pub fn is_clean_absolute(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= MAX_PATH
        && !path.chars().any(char::is_control)
        && !path.split('/').any(|c| c == ".." || c == ".")
}

/// Checks the image reference and the mounts of a job (`image`, `mounts`).
pub(super) fn validate(image: Option<&str>, mounts: &[ContainerMount]) -> Result<(), FieldError> {
    if let Some(image) = image {
        let ok_chars = image.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/' | ':' | '@' | '+')
        });
        if image.is_empty() || image.len() > MAX_IMAGE_REF || !ok_chars || image.starts_with('-') {
            return Err(bad(
                "image",
                format!(
                    "must be an image reference of 1..={MAX_IMAGE_REF} characters \
                     (letters, digits, . - _ / : @ +), e.g. registry.lab/team/trainer:v7, \
                     name@sha256:..., or oci:/path/to/layout:tag"
                ),
            ));
        }
    } else if !mounts.is_empty() {
        return Err(bad("mounts", "mounts need an image (--image)"));
    }
    if mounts.len() > MAX_MOUNTS {
        return Err(bad("mounts", format!("more than {MAX_MOUNTS} mounts")));
    }
    for (i, m) in mounts.iter().enumerate() {
        for (field, path) in [("source", &m.source), ("destination", &m.destination)] {
            if !is_clean_absolute(path) {
                return Err(bad(
                    format!("mounts[{i}].{field}"),
                    "must be an absolute path without `.` or `..` components",
                ));
            }
        }
        if m.destination == "/" {
            return Err(bad(
                format!("mounts[{i}].destination"),
                "cannot replace the image's root",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pyxis_mount_forms_parse() {
        let m = ContainerMount::parse("/datasets:/data:ro").unwrap();
        assert_eq!(
            (m.source.as_str(), m.destination.as_str()),
            ("/datasets", "/data")
        );
        assert!(m.read_only);
        let same = ContainerMount::parse("/home").unwrap();
        assert_eq!(same.destination, "/home");
        assert!(!same.read_only);
        assert!(ContainerMount::parse("/home:ro").unwrap().read_only);
        assert!(ContainerMount::parse("/a:/b:rx").is_err());
        assert!(ContainerMount::parse("/a:/b:ro:x").is_err());
        assert_eq!(
            ContainerMount::parse_list("/a:/a, /b:/c:ro").unwrap().len(),
            2
        );
    }

    #[test]
    fn bad_images_and_mounts_name_their_field() {
        let m = |s: &str, d: &str| ContainerMount {
            source: s.into(),
            destination: d.into(),
            read_only: false,
        };
        assert!(validate(Some("registry.lab/team/trainer:v7"), &[]).is_ok());
        assert!(validate(Some("busybox@sha256:abc"), &[]).is_ok());
        assert_eq!(validate(Some("-v"), &[]).unwrap_err().field, "image");
        assert_eq!(validate(Some("a b"), &[]).unwrap_err().field, "image");
        assert_eq!(
            validate(None, &[m("/a", "/a")]).unwrap_err().field,
            "mounts"
        );
        let e = validate(Some("x"), &[m("/a", "/a"), m("/b/../etc", "/b")]).unwrap_err();
        assert_eq!(e.field, "mounts[1].source");
        let e = validate(Some("x"), &[m("/a", "rel")]).unwrap_err();
        assert_eq!(e.field, "mounts[0].destination");
        assert_eq!(
            validate(Some("x"), &[m("/a", "/")]).unwrap_err().field,
            "mounts[0].destination"
        );
    }
}
