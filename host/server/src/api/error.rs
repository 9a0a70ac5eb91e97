//! The API's one error type: an HTTP status plus `{"error": {"code", "message",
//! "field"}}` (the body's type is `gantry_api::error::ErrorBody`). Every failure of a
//! request maps here; nothing answers with a bare text body or a panic.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An API error.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Machine-readable code.
    pub code: &'static str,
    /// Human message.
    pub message: String,
    /// The request field at fault, when there is one.
    pub field: Option<String>,
}

impl ApiError {
    /// Any error.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    /// 400 for a field.
    pub fn field(code: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    /// 500 (logged).
    pub fn internal(message: impl std::fmt::Display) -> Self {
        tracing::error!("internal error: {message}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            message.to_string(),
        )
    }

    /// 422 with a field.
    pub fn unprocessable(
        code: &'static str,
        field: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code,
            message: message.into(),
            field,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = gantry_api::error::ErrorBody {
            error: gantry_api::error::ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
                field: self.field,
            },
        };
        // Through a `Value`, whose keys are sorted: the same bytes as before the body had a type.
        let body = serde_json::to_value(body).unwrap_or_default();
        (self.status, Json(body)).into_response()
    }
}
