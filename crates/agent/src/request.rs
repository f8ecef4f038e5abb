//! The body of `POST /run`, checked.

use anypath_wire::Runtime;
use serde_json::Value;

/// Largest accepted body.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// A checked run request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    /// The task in plain words.
    pub input: String,
    /// Return every tool step with the answer.
    pub include_steps: bool,
    /// The tenant's session to work in; a fresh one (closed at the end) otherwise.
    pub session_id: Option<String>,
    /// Model turns allowed, at most the configured cap.
    pub max_iterations: Option<u32>,
    /// The Python the session runs (`python` or `python-data`), when the
    /// run creates it; the sandbox host's default otherwise.
    pub runtime: Option<Runtime>,
}

/// Why a body was refused: always a 400 with one of these codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("the body is {size} bytes; at most {MAX_BODY_BYTES} are accepted")]
    TooLarge { size: usize },
    #[error("the body is not a JSON object: {0}")]
    NotJson(String),
    #[error("{0}")]
    Invalid(String),
}

impl RequestError {
    /// The error envelope's code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "body_too_large",
            Self::NotJson(_) => "invalid_json",
            Self::Invalid(_) => "invalid_request",
        }
    }
}

impl RunRequest {
    /// Parses and checks a body: `input` a non-empty string, `includeSteps`
    /// a boolean, `session_id` 1-64 of `A-Z a-z 0-9 - _`, `max_iterations` at
    /// least 1, `runtime` `python` or `python-data`.
    pub fn parse(body: &[u8]) -> Result<Self, RequestError> {
        if body.len() > MAX_BODY_BYTES {
            return Err(RequestError::TooLarge { size: body.len() });
        }
        let value: Value = serde_json::from_slice(body).map_err(|e| RequestError::NotJson(e.to_string()))?;
        let Some(object) = value.as_object() else {
            return Err(RequestError::NotJson("expected an object".into()));
        };
        if let Some(unknown) = object.keys().find(|k| !["input", "includeSteps", "session_id", "max_iterations", "runtime"].contains(&k.as_str())) {
            return Err(RequestError::Invalid(format!("unknown field {unknown:?}")));
        }
        let input = match object.get("input") {
            Some(Value::String(text)) if !text.trim().is_empty() => text.clone(),
            Some(Value::String(_)) => return Err(RequestError::Invalid("input must not be empty".into())),
            Some(_) => return Err(RequestError::Invalid("input must be a string".into())),
            None => return Err(RequestError::Invalid("input is required".into())),
        };
        let include_steps = match object.get("includeSteps") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(RequestError::Invalid("includeSteps must be a boolean".into())),
        };
        let session_id = match object.get("session_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) if valid_session_id(id) => Some(id.clone()),
            Some(_) => return Err(RequestError::Invalid("session_id must be 1-64 of A-Z a-z 0-9 - _".into())),
        };
        let max_iterations = match object.get("max_iterations") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Some(u32::try_from(n).unwrap_or(u32::MAX)),
                _ => return Err(RequestError::Invalid("max_iterations must be a whole number of at least 1".into())),
            },
        };
        let runtime = match object.get("runtime") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => match name.parse::<Runtime>() {
                // The agent's tools write and test Python.
                Ok(runtime) if runtime.is_python() => Some(runtime),
                Ok(other) => return Err(RequestError::Invalid(format!("runtime: the agent's tools run Python; {other} is not one of python, python-data"))),
                Err(e) => return Err(RequestError::Invalid(format!("runtime: {e}"))),
            },
            Some(_) => return Err(RequestError::Invalid("runtime must be a string: python or python-data".into())),
        };
        Ok(Self { input, include_steps, session_id, max_iterations, runtime })
    }

    /// Model turns for this run: the request's, never above `cap`.
    pub fn iterations(&self, cap: u32) -> u32 {
        self.max_iterations.map_or(cap, |n| n.min(cap)).max(1)
    }
}

/// A session id the sandbox host accepts.
pub fn valid_session_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_must_be_a_non_empty_string() {
        assert_eq!(RunRequest::parse(br#"{"input": "List files in sandbox"}"#).map(|r| r.input), Ok("List files in sandbox".into()));
        for (body, code) in [
            (&br#"{}"#[..], "invalid_request"),
            (br#"{"input": 3}"#, "invalid_request"),
            (br#"{"input": "  "}"#, "invalid_request"),
            (br#"{"input": "x", "includeSteps": "yes"}"#, "invalid_request"),
            (br#"{"input": "x", "session_id": "../etc"}"#, "invalid_request"),
            (br#"{"input": "x", "max_iterations": 0}"#, "invalid_request"),
            (br#"{"input": "x", "extra": 1}"#, "invalid_request"),
            (br#"{"input": "x", "runtime": "javascript"}"#, "invalid_request"),
            (br#"["input"]"#, "invalid_json"),
            (b"not json", "invalid_json"),
        ] {
            assert_eq!(RunRequest::parse(body).map_err(|e| e.code()), Err(code), "{}", String::from_utf8_lossy(body));
        }
        let big = format!(r#"{{"input": "{}"}}"#, "x".repeat(MAX_BODY_BYTES));
        assert_eq!(RunRequest::parse(big.as_bytes()).map_err(|e| e.code()), Err("body_too_large"));
    }

    #[test]
    fn max_iterations_only_lowers_the_cap() {
        let request = RunRequest::parse(br#"{"input": "x", "max_iterations": 50, "includeSteps": true}"#).expect("valid");
        assert_eq!((request.iterations(6), request.include_steps), (6, true));
        let lower = RunRequest::parse(br#"{"input": "x", "max_iterations": 2}"#).expect("valid");
        assert_eq!(lower.iterations(6), 2);
    }
}
