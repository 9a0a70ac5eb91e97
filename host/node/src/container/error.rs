//! Why an image could not be made ready on this node: a pull or an unpack that failed, the
//! cache directory failing, a bad reference, or a node that refuses the image. Every step of
//! making an image ready (`image_ref`, `registry_pull`, `local_import`, `image_store`)
//! returns it, and the task ends with it in its log.
//!
//! Owns: `ImageError` and `cache_err`. Does not own the steps that fail with it.

use std::io;
use std::path::{Path, PathBuf};

/// Why an image could not be made ready (the task ends with it in its log).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("pulling {image} failed: {message}")]
    Pull { image: String, message: String },
    #[error("unpacking {image} failed: {message}")]
    Unpack { image: String, message: String },
    #[error("the image cache at {path}: {source}")]
    Cache { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Reference(String),
    #[error("{image} is refused on this node: {reason}")]
    Refused { image: String, reason: String },
}

/// Maps an I/O error on `path` of the image cache to an [`ImageError::Cache`].
pub(crate) fn cache_err(path: &Path) -> impl FnOnce(io::Error) -> ImageError + '_ {
    move |source| ImageError::Cache {
        path: path.to_path_buf(),
        source,
    }
}
