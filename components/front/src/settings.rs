//! The settings every public REST request is served under, from the app's
//! Spin variables: the same ones in both components that answer it.

use anypath_rest::cors::CorsPolicy;
use anypath_rest::settings::Settings;

/// What the store and the gateway both read before serving a public request.
pub struct FrontSettings {
    /// When non-empty, requests need `Authorization: Bearer <token>`.
    pub auth_token: String,
    /// `key:tenant` pairs separated by commas: an `X-API-Key` selects a tenant.
    pub api_keys: Vec<(String, String)>,
    /// Which web pages on other origins may call (`cors_allowed_origins`).
    pub cors: CorsPolicy,
    pub max_body_bytes: usize,
    /// `delete_reply = "record"`: a DELETE answers 200 with the deleted
    /// record, as under `Prefer: return=representation`, instead of 204.
    pub delete_returns_record: bool,
    /// `planner_mode` as set (empty, `rules`, `llm` or `auto`): which
    /// requests the rules plan without asking the planner.
    pub planner_mode: String,
    /// `rules_direct`: a request the rules plan runs in the store by the
    /// data operations themselves; `false` runs the rules' Python blocks in
    /// the sandbox instead (the same answers, slower; for comparison).
    pub rules_direct: bool,
}

impl FrontSettings {
    /// Reads the variables through `settings`, which keeps any value it cannot use.
    pub fn read<F: Fn(&str) -> Option<String>>(settings: &mut Settings<F>) -> Self {
        Self {
            auth_token: settings.text("auth_token"),
            api_keys: settings.api_keys("api_keys"),
            cors: settings.cors(),
            max_body_bytes: settings.number("max_body_bytes", 1 << 20),
            delete_returns_record: match settings.text("delete_reply").trim() {
                "" | "no-content" => false,
                "record" => true,
                other => {
                    settings.reject("delete_reply", other, "is neither no-content nor record");
                    false
                }
            },
            planner_mode: settings.text("planner_mode").trim().to_owned(),
            rules_direct: settings.flag("rules_direct", true),
        }
    }
}
