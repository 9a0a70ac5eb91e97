//! A route of the API as one value: its method, path, handler and what the OpenAPI document
//! says of it ([`Doc`]: summary, what it takes, its success status and answer, its 4xx). The
//! list of them (`routes.rs`) is the one place a route is added: the router (`mod.rs`) and the
//! document (`openapi.rs`) are both built from it, so no route is served undocumented and no
//! operation is documented that is not served.
//!
//! Owns the route type and the vocabulary of its documentation. Does not own the list
//! (`routes.rs`), how a [`Doc`] becomes JSON (`openapi.rs`) or the handlers.

use super::ApiState;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};

/// What an operation takes.
#[derive(Debug, Clone, Copy)]
pub(super) enum In {
    /// No body, no parameters.
    Nothing,
    /// The `{id}` path parameter.
    Id,
    /// A JSON body of this schema.
    Body(&'static str),
    /// Component bytes.
    Upload,
    /// Query parameters of the job list.
    JobQuery,
    /// `{id}` and `?task=`.
    Task,
    /// `{id}`, `?task=`, `?offset=` and `?limit=` (a log's byte range).
    LogRange,
    /// Query parameters of `GET /v1/accounting`.
    AccountingQuery,
    /// `{id}` and a JSON body of this schema.
    IdBody(&'static str),
    /// `?max_batches=` of `POST /v1/admin/gc`.
    GcQuery,
    /// A node's `{name}`, with a JSON body of this schema when given.
    Name(Option<&'static str>),
}

/// What a 2xx answer is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Out {
    /// JSON of this schema.
    Schema(&'static str),
    /// A JSON array of this schema.
    ListOf(&'static str),
    /// Any JSON object.
    Object,
    /// Any JSON array.
    Array,
    /// Plain text.
    Text,
    /// A stream of JSON lines.
    Ndjson,
    /// A `text/event-stream`.
    EventStream,
}

/// What the OpenAPI document says of one route.
#[derive(Debug, Clone, Copy)]
pub(super) struct Doc {
    /// One line for people.
    pub(super) summary: &'static str,
    /// Parameters and body.
    pub(super) input: In,
    /// The success status.
    pub(super) ok: u16,
    /// The success answer.
    pub(super) out: Out,
    /// The 4xx it may answer besides those every route may (403 Origin, 421 Host, 415).
    pub(super) errors: &'static [u16],
}

/// A [`Doc`], in the order a route line reads.
pub(super) const fn doc(
    summary: &'static str,
    input: In,
    ok: u16,
    out: Out,
    errors: &'static [u16],
) -> Doc {
    Doc {
        summary,
        input,
        ok,
        out,
        errors,
    }
}

/// One method of one path, its handler and its documentation.
pub(super) struct Route {
    /// `get`, `post`, `put`, `delete` or `patch`, as the OpenAPI document spells it.
    pub(super) method: &'static str,
    /// The path, with `{param}` segments.
    pub(super) path: &'static str,
    /// The handler.
    pub(super) router: MethodRouter<ApiState>,
    /// What the document says of it.
    pub(super) doc: Doc,
}

impl Route {
    /// The same route with no body limit (uploads check their own, `policy::upload`).
    pub(super) fn without_body_limit(self) -> Self {
        Self {
            router: self.router.layer(DefaultBodyLimit::disable()),
            ..self
        }
    }
}

fn at<H, T>(method: &'static str, filter: MethodFilter, path: &'static str, h: H, doc: Doc) -> Route
where
    H: Handler<T, ApiState>,
    T: 'static,
{
    Route {
        method,
        path,
        router: on(filter, h),
        doc,
    }
}

/// `GET path`.
pub(super) fn get<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H, d: Doc) -> Route {
    at("get", MethodFilter::GET, path, h, d)
}

/// `POST path`.
pub(super) fn post<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H, d: Doc) -> Route {
    at("post", MethodFilter::POST, path, h, d)
}

/// `PUT path`.
pub(super) fn put<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H, d: Doc) -> Route {
    at("put", MethodFilter::PUT, path, h, d)
}

/// `DELETE path`.
pub(super) fn delete<H: Handler<T, ApiState>, T: 'static>(
    path: &'static str,
    h: H,
    d: Doc,
) -> Route {
    at("delete", MethodFilter::DELETE, path, h, d)
}

/// `PATCH path`.
pub(super) fn patch<H: Handler<T, ApiState>, T: 'static>(
    path: &'static str,
    h: H,
    d: Doc,
) -> Route {
    at("patch", MethodFilter::PATCH, path, h, d)
}
