//! The planner's `GET /status` as the gateway reads it, and the error a
//! component reports for a variable whose value cannot be used.

use serde::{Deserialize, Serialize};

/// A variable whose value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("variable {variable} = {value}: {reason}")]
pub struct SettingError {
    pub variable: String,
    /// The value as set, quoted; `(secret)` for a secret variable.
    pub value: String,
    pub reason: String,
}

/// What the planner says of itself: its mode and why, the model, and
/// whether an LLM can be reached (for plans, and for the agent).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PlannerStatus {
    /// `rules`, `llm` or `auto`.
    pub planner_mode: String,
    /// Why that mode was chosen.
    pub reason: String,
    pub llm_host: String,
    pub model: String,
    pub prompt_version: String,
    /// The structured-output mode in force (`auto` when stepping down as needed).
    pub structured_output: String,
    /// The mode can plan: rules, or an LLM with usable settings.
    pub llm_ready: bool,
    /// An LLM can be called, whatever the mode (what the agent needs).
    pub llm_configured: bool,
    /// The planner's variables whose values cannot be used.
    #[serde(default)]
    pub config_errors: Vec<SettingError>,
}
