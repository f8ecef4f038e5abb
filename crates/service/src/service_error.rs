//! Why a call to the interpreter service failed: one error for every
//! transport, each kind with the stable code both the HTTP envelope and MCP
//! tool errors name.

use anypath_interpreter::InterpreterError;

use crate::admission::Refused;

/// A failed service call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceError {
    /// The process serves no code interpreter.
    #[error("this service runs no code interpreter")]
    NoInterpreter,
    /// No valid key or token: the caller has no tenant.
    #[error("missing or wrong API key or bearer token")]
    Unauthorized,
    /// A request body that is not the JSON the call takes.
    #[error("{0}")]
    InvalidJson(#[source] serde_json::Error),
    /// Tool arguments that do not fit the tool's input schema.
    #[error("{0}")]
    InvalidArguments(#[source] serde_json::Error),
    /// A query string that does not parse.
    #[error("overwrite must be true or false; runtime python or python-data")]
    InvalidQuery,
    /// File content that is not base64.
    #[error("content_base64: {0}")]
    InvalidBase64(#[source] base64::DecodeError),
    /// A body that could not be received whole: cut off, over its limit,
    /// or a multipart form that does not parse.
    #[error("{message}")]
    Body {
        /// The HTTP status it answers with (400 or 413).
        status: u16,
        message: String,
    },
    /// A run's environment names a variable this service does not let runs set.
    #[error(transparent)]
    EnvNotAllowed(#[from] crate::run_env::EnvRefused),
    /// Admission turned the run away.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The interpreter refused or failed the call.
    #[error(transparent)]
    Interpreter(InterpreterError),
    /// No run of the caller's by this id in this session.
    #[error("no run {0:?} in this session")]
    NoSuchRun(String),
    /// No command of the caller's by this id in this session (its message says why).
    #[error("{0}")]
    NoSuchCommand(String),
    /// Input for a command whose stdin is not open (it ended, or was
    /// started without `stdin_open`).
    #[error("{0}")]
    StdinNotOpen(String),
    /// The error a tracked command ended with, answered as it was first.
    #[error("{message}")]
    Kept { status: u16, code: &'static str, message: String },
    /// A run already has this id.
    #[error("a run with id {0:?} was already asked for: GET /v1/sessions/{{id}}/runs/{0} finds it")]
    RunExists(String),
    /// A callback to a host the operator does not allow.
    #[error("{0}")]
    CallbackNotAllowed(String),
    /// Work on the blocking pool did not finish (it panicked or was cancelled).
    #[error("the call's file work did not finish: {0}")]
    Internal(String),
}

impl ServiceError {
    /// The HTTP status the error answers with, on every HTTP transport.
    pub fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            Self::Refused(crate::admission::Refused::TenantBusy { .. }) => StatusCode::TOO_MANY_REQUESTS,
            Self::Refused(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Interpreter(e) => StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Self::NoInterpreter => StatusCode::NOT_FOUND,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::InvalidJson(_) | Self::InvalidArguments(_) | Self::InvalidQuery | Self::InvalidBase64(_) | Self::EnvNotAllowed(_) => {
                StatusCode::BAD_REQUEST
            }
            Self::Body { status, .. } => StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            Self::NoSuchRun(_) | Self::NoSuchCommand(_) => StatusCode::NOT_FOUND,
            Self::StdinNotOpen(_) => StatusCode::CONFLICT,
            Self::Kept { status, .. } => StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Self::RunExists(_) => StatusCode::CONFLICT,
            Self::CallbackNotAllowed(_) => StatusCode::FORBIDDEN,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoInterpreter => "not_found",
            Self::Unauthorized => "unauthorized",
            Self::InvalidJson(_) => "invalid_json",
            Self::InvalidArguments(_) => "invalid_arguments",
            Self::InvalidQuery => "invalid_query",
            Self::InvalidBase64(_) => "invalid_base64",
            Self::Body { status: 413, .. } => "body_too_large",
            Self::Body { .. } => "invalid_body",
            Self::EnvNotAllowed(_) => "env_not_allowed",
            Self::Refused(refused) => refused.code(),
            Self::Interpreter(e) => e.code(),
            Self::NoSuchRun(_) => "no_such_run",
            Self::NoSuchCommand(_) => "no_such_command",
            Self::StdinNotOpen(_) => "stdin_not_open",
            Self::Kept { code, .. } => code,
            Self::RunExists(_) => "run_exists",
            Self::CallbackNotAllowed(_) => "callback_not_allowed",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<InterpreterError> for ServiceError {
    /// An interpreter operation's failure; the two kinds the service named
    /// before operations moved into the interpreter keep their own variants.
    fn from(e: InterpreterError) -> Self {
        match e {
            InterpreterError::InvalidBase64(e) => Self::InvalidBase64(e),
            InterpreterError::Unfinished(e) => Self::Internal(e),
            e => Self::Interpreter(e),
        }
    }
}

impl From<tokio::task::JoinError> for ServiceError {
    fn from(e: tokio::task::JoinError) -> Self {
        Self::Internal(e.to_string())
    }
}
