//! Image references as jobs write them: a registry's (`host/name:tag`, `name@sha256:...`),
//! a local OCI layout (`oci:/dir/layout:tag`) or a `docker save` archive
//! (`docker-archive:/dir/file.tar`), and the names of their entries in the node's cache (a hash of the whole reference:
//! injective, never an escaping).
//!
//! Owns: parsing and naming. Does not own fetching (`image_store`) nor which local paths a
//! job may name (`Containers::layout_allowed`, checked by the daemon at submit).

use super::error::ImageError;
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

/// The cache entry's file name for `reference` (the text of a registry reference, or a
/// local source's own text): the hex SHA-256 of its bytes, so two different references never
/// share an entry (a lossy escaping made `reg/app@sha256:X` and the tag `reg/app:sha256_X`
/// one directory). The reference itself is kept beside the entry (`<name>.ref`) for people.
pub(crate) fn entry_name(reference: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(reference.as_bytes()))
}

/// The sha256 digest (`sha256:<64 hex>`) a registry reference names after its `@`, if any.
pub(crate) fn pinned_digest(reference: &str) -> Option<&str> {
    let (_, digest) = reference.rsplit_once('@')?;
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(digest)
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
    }

    #[test]
    fn entry_names_are_injective_where_the_old_escaping_was_not() {
        let hex = "ab".repeat(32);
        let by_digest = format!("reg/team/app@sha256:{hex}");
        let by_tag = format!("reg/team/app:sha256_{hex}");
        assert_ne!(entry_name(&by_digest), entry_name(&by_tag));
        assert_ne!(
            entry_name("127.0.0.1:5000/a:v1"),
            entry_name("127.0.0.1:5001/a:v1")
        );
        assert_eq!(entry_name("a").len(), 64);
        assert!(!entry_name("a").contains('.'), "no extension to cut");
        assert_eq!(pinned_digest(&by_digest), Some(&by_digest[13..]));
        assert_eq!(pinned_digest(&by_tag), None);
        assert_eq!(pinned_digest("reg/app@sha256:00"), None);
    }
}
