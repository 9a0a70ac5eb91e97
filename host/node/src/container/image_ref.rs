//! Image references as jobs write them: a registry's (`host/name:tag`, `name@sha256:...`),
//! a local OCI layout (`oci:/dir/layout:tag`) or a `docker save` archive
//! (`docker-archive:/dir/file.tar`), and the file names they get in the node's cache.
//!
//! Owns: parsing and naming. Does not own fetching (`image_store`) nor which local paths a
//! job may name (`Containers::layout_allowed`, checked by the daemon at submit).

use super::image_store::ImageError;
use std::path::{Path, PathBuf};

/// Where an image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A local OCI layout and the tag in it.
    Layout { dir: PathBuf, tag: String },
    /// A registry reference (`host/name:tag`, `name@sha256:...`).
    Registry { reference: String, by_digest: bool },
    /// A `docker save` archive (`docker-archive:/dir/file.tar`, optionally `:name:tag` of
    /// one of several images in it).
    Archive { path: PathBuf, name: Option<String> },
}

impl Source {
    /// Parses an image reference as a job gives it.
    pub fn parse(image: &str) -> Result<Self, ImageError> {
        if let Some(rest) = image.strip_prefix("oci:") {
            let (dir, tag) = match rest.rsplit_once(':') {
                Some((dir, tag)) if !tag.contains('/') => (dir, tag),
                _ => (rest, "latest"),
            };
            if !dir.starts_with('/') || dir.split('/').any(|c| c == "..") {
                return Err(ImageError::Reference(format!(
                    "`{image}`: a local layout is named by an absolute path (oci:/dir/layout:tag)"
                )));
            }
            return Ok(Self::Layout {
                dir: PathBuf::from(dir),
                tag: tag.to_string(),
            });
        }
        if let Some(rest) = image.strip_prefix("docker-archive:") {
            let (path, name) = match rest.find(".tar:") {
                Some(end) => (&rest[..end + 4], Some(rest[end + 5..].to_string())),
                None => (rest, None),
            };
            if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
                return Err(ImageError::Reference(format!(
                    "`{image}`: an archive is named by an absolute path (docker-archive:/dir/file.tar)"
                )));
            }
            return Ok(Self::Archive {
                path: PathBuf::from(path),
                name: name.filter(|n| !n.is_empty()),
            });
        }
        if image.starts_with('-') || image.is_empty() {
            return Err(ImageError::Reference(format!("`{image}` is not an image")));
        }
        Ok(Self::Registry {
            reference: image.to_string(),
            by_digest: image.contains('@'),
        })
    }
}

/// A file name for `reference` in the cache (letters, digits, `-`, `_`, `.`).
pub(crate) fn file_name_of(reference: &str) -> String {
    reference
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Source {
    /// The local path an image is read from (a layout's directory, an archive's file),
    /// which must lie under `[containers] image_dirs`; `None` for a registry's.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Self::Layout { dir, .. } => Some(dir),
            Self::Archive { path, .. } => Some(path),
            Self::Registry { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn references_parse_into_layouts_and_registry_names() {
        assert_eq!(
            Source::parse("oci:/srv/images/busybox:v1").unwrap(),
            Source::Layout {
                dir: "/srv/images/busybox".into(),
                tag: "v1".into()
            }
        );
        assert_eq!(
            Source::parse("oci:/srv/images/busybox").unwrap(),
            Source::Layout {
                dir: "/srv/images/busybox".into(),
                tag: "latest".into()
            }
        );
        assert!(Source::parse("oci:relative:v1").is_err());
        assert!(Source::parse("oci:/srv/../etc:v1").is_err());
        assert!(Source::parse("--src-creds=x").is_err());
        assert_eq!(
            Source::parse("127.0.0.1:5000/test@sha256:ab").unwrap(),
            Source::Registry {
                reference: "127.0.0.1:5000/test@sha256:ab".into(),
                by_digest: true
            }
        );
        assert_eq!(
            Source::parse("docker-archive:/srv/images/t.tar").unwrap(),
            Source::Archive {
                path: "/srv/images/t.tar".into(),
                name: None
            }
        );
        assert_eq!(
            Source::parse("docker-archive:/srv/images/t.tar:lab/t:v2").unwrap(),
            Source::Archive {
                path: "/srv/images/t.tar".into(),
                name: Some("lab/t:v2".into())
            }
        );
        assert!(Source::parse("docker-archive:t.tar").is_err());
        assert!(Source::parse("docker-archive:/a/../t.tar").is_err());
        assert_eq!(
            file_name_of("127.0.0.1:5000/a/b:v1"),
            "127.0.0.1_5000_a_b_v1"
        );
    }
}
