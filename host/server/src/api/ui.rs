//! The web dashboard's static files, `GET /ui` and `GET /ui/{file}`: plain HTML, CSS and
//! JavaScript modules from `host/server/ui/`, embedded in the binary with `include_str!`
//! (no build step, no CDN: the page works offline and ships with the daemon).
//!
//! These routes are merged outside the token check: the files hold no data. Every
//! number the page shows comes from the `/v1` API, called with the token the user
//! typed into the page (`Authorization: Bearer`), so a page without a valid token shows
//! nothing but its login form.
//!
//! Caching: file names carry no content hash, so every answer is `Cache-Control:
//! no-cache` with a strong `ETag` (sha256 of the content); the browser revalidates and
//! gets a `304` while the binary is unchanged, and the new files right after an upgrade.
//!
//! Owns: the file table, content types and cache headers. Does not own what the page
//! does (`host/server/ui/*.js`) or the API it calls.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// One embedded file: (name under `/ui/`, content type, content).
type File = (&'static str, &'static str, &'static str);

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the dashboard.
const FILES: &[File] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../ui/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../ui/style.css"),
    ),
    ("app.js", JS, include_str!("../../ui/app.js")),
    ("api.js", JS, include_str!("../../ui/api.js")),
    ("dom.js", JS, include_str!("../../ui/dom.js")),
    ("cluster.js", JS, include_str!("../../ui/cluster.js")),
    ("queue.js", JS, include_str!("../../ui/queue.js")),
    ("job.js", JS, include_str!("../../ui/job.js")),
    ("services.js", JS, include_str!("../../ui/services.js")),
    ("policy.js", JS, include_str!("../../ui/policy.js")),
    ("usage.js", JS, include_str!("../../ui/usage.js")),
    ("chart.js", JS, include_str!("../../ui/chart.js")),
    ("vlist.js", JS, include_str!("../../ui/vlist.js")),
];

/// The strong ETag of each file, in [`FILES`] order.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(_, _, body)| format!("\"{}\"", &hex::encode(Sha256::digest(body))[..32]))
        .collect()
});

/// The dashboard's routes (no token needed; see the module header).
pub(super) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route(
            "/ui/",
            get(|headers: HeaderMap| async move { serve("index.html", &headers) }),
        )
        .route(
            "/ui/{file}",
            get(|Path(file): Path<String>, headers: HeaderMap| async move {
                serve(&file, &headers)
            }),
        )
}

/// Answers one file (304 when the client's copy is current, 404 naming `file`).
fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(at) = FILES.iter().position(|(n, _, _)| *n == name) else {
        let mut err =
            super::ApiError::not_found(format!("the dashboard has no file {name:?}; open /ui/"));
        err.field = Some("file".into());
        return err.into_response();
    };
    let (_, content_type, body) = FILES[at];
    let etag = &ETAGS[at];
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let common = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::ETAG,
            HeaderValue::from_str(etag).unwrap_or(HeaderValue::from_static("\"\"")),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_file_is_served_with_its_type_and_revalidates() {
        for (name, content_type, body) in FILES {
            let resp = serve(name, &HeaderMap::new());
            assert_eq!(resp.status(), StatusCode::OK, "{name}");
            assert_eq!(resp.headers()[header::CONTENT_TYPE], *content_type);
            assert!(!body.is_empty(), "{name} is empty");
            let etag = resp.headers()[header::ETAG].clone();
            let mut again = HeaderMap::new();
            again.insert(header::IF_NONE_MATCH, etag);
            assert_eq!(serve(name, &again).status(), StatusCode::NOT_MODIFIED);
        }
        assert_eq!(
            serve("../Cargo.toml", &HeaderMap::new()).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        for (name, _, body) in FILES {
            for piece in body.split("from \"./").skip(1) {
                let file = piece.split('"').next().unwrap();
                assert!(
                    FILES.iter().any(|(n, _, _)| *n == file),
                    "{name} imports ./{file}, which is not in FILES"
                );
            }
        }
    }
}
