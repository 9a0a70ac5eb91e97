//! The body of every refusal of the daemon's API: `{"error": {"code", "message", "field"}}`
//! (`field` only when one request field is at fault).
//!
//! Owns this data type. Which status and code a failure gets is the daemon's
//! (`api::error`); how a client shows it is the client's (`client`).

use serde::{Deserialize, Serialize};

/// The JSON body of an API error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Error))]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// Machine-readable code (`invalid-field`, `not-found`, `forbidden`...).
    pub code: String,
    /// Human message.
    pub message: String,
    /// The request field at fault, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}
