//! Why a call of the typed client failed: the daemon could not be reached (TLS and protocol
//! failures said plainly), it refused the request (its `{"error": ...}` body), or its answer
//! was not what the route returns.
//!
//! Owns the error type and its messages (the CLI prints them as they are). Does not own
//! making requests (`client`).

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer: the connection failed.
    #[error("cannot reach the gantry daemon at {server}")]
    Unreachable {
        /// The server as given (`unix:PATH` or the URL).
        server: String,
        /// What failed.
        #[source]
        source: Box<ureq::Error>,
    },
    /// The daemon closed the connection while the request's body was still being sent: it
    /// answered before reading all of it, which it does to refuse a request.
    #[error(
        "the gantry daemon at {server} closed the connection before it had the whole request: it most likely refused it (403: check your role with `gantry whoami`; 413: the body is too large)"
    )]
    ClosedWhileSending {
        /// The server.
        server: String,
        /// What failed.
        #[source]
        source: Box<ureq::Error>,
    },
    /// A plain-HTTP request was answered with something else (likely HTTPS).
    #[error(
        "the gantry daemon at {server} did not answer in HTTP (if it serves HTTPS, use https://)"
    )]
    NotHttp {
        /// The server.
        server: String,
        /// What failed.
        #[source]
        source: Box<ureq::Error>,
    },
    /// The daemon's certificate was refused.
    #[error(
        "cannot verify the daemon's certificate: {problem} (server {server}; to trust a private CA or a self-signed certificate, pass --ca-cert FILE or set GANTRY_CA_CERT)"
    )]
    Certificate {
        /// The server.
        server: String,
        /// Why, in words.
        problem: String,
    },
    /// The TLS handshake failed for another reason.
    #[error(
        "TLS handshake with the gantry daemon at {server} failed: {message} (is it serving HTTPS?)"
    )]
    Handshake {
        /// The server.
        server: String,
        /// What rustls said.
        message: String,
    },
    /// The daemon refused the request.
    #[error("{status} {code}: {message}{}", .field.as_ref().map(|f| format!(" (field `{f}`)")).unwrap_or_default())]
    Api {
        /// HTTP status.
        status: u16,
        /// The error's code (`error` when the body had none).
        code: String,
        /// The error's message (the whole body when it had none).
        message: String,
        /// The request field at fault.
        field: Option<String>,
    },
    /// The answer is not what the route returns.
    #[error("unexpected answer from the gantry daemon to {path}: {source}")]
    Decode {
        /// The request's path.
        path: String,
        /// What did not fit.
        #[source]
        source: serde_json::Error,
    },
    /// A streamed answer failed without an error body.
    #[error("unexpected answer")]
    Unexpected,
}

impl Error {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}
