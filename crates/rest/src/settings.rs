//! The app's Spin variables, defined once: their names, defaults and meaning
//! ([`VARIABLES`]: the configuration reference is generated from it, and a
//! test holds `spin.toml` to it), and a reader ([`Settings`]) that reports a
//! value it cannot use instead of quietly taking the default.

use std::str::FromStr;
use std::time::Duration;

use crate::caller;
use crate::cors::CorsPolicy;

/// One variable of the app (`[variables]` in `spin.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    /// The default `spin.toml` declares.
    pub default: &'static str,
    /// Declared `secret = true`: never logged, never echoed in an error.
    pub secret: bool,
    /// The components that read it.
    pub read_by: &'static [&'static str],
    pub description: &'static str,
}

const fn var(name: &'static str, default: &'static str, read_by: &'static [&'static str], description: &'static str) -> Variable {
    Variable { name, default, secret: false, read_by, description }
}

const fn secret(name: &'static str, read_by: &'static [&'static str], description: &'static str) -> Variable {
    Variable { name, default: "", secret: true, read_by, description }
}

const GATEWAY: &[&str] = &["gateway"];
/// The components that answer the REST face: the store (what the rules plan) and the gateway.
const REST_FACE: &[&str] = &["gateway", "store"];
const PUBLIC: &[&str] = &["gateway", "store", "agent"];
/// The components that call the sandbox hosts.
const SANDBOX_CALLERS: &[&str] = &["gateway", "agent"];
const PLANNER: &[&str] = &["planner"];
const STORE: &[&str] = &["store"];
const AGENT: &[&str] = &["agent"];
const ALL_CALLERS: &[&str] = &["gateway", "agent", "planner"];

/// Every variable of the app, in `spin.toml` order.
pub const VARIABLES: &[Variable] = &[
    secret(
        "auth_token",
        PUBLIC,
        "When set, every request needs `Authorization: Bearer <auth_token>`; under `anypath up` the sandbox and E2B listeners ask for it too.",
    ),
    secret(
        "api_keys",
        PUBLIC,
        "`key:tenant` pairs separated by commas; an `X-API-Key` header selects the tenant (under `anypath up`, on the sandbox and E2B listeners too). A tenant is 1-64 characters of A-Z, a-z, 0-9, `_` or `-`.",
    ),
    var(
        "sandbox_hosts",
        "127.0.0.1:3001",
        SANDBOX_CALLERS,
        "The sandbox hosts (`anypath sandbox serve`), comma-separated `host:port`. REST blocks spread over them and move on when one does not answer; an agent session stays on one host. `anypath up` fills in its own host unless `SPIN_VARIABLE_SANDBOX_HOSTS` is set.",
    ),
    var(
        "sandbox_allowed",
        "127.0.0.1:3001",
        &[],
        "The outbound allowlist entry (`host[:port]`) covering every sandbox host, e.g. `127.0.0.1:3001..3011` (a port range, end excluded) or `*.anypath-sandbox.anypath.svc.cluster.local:3001`. Used by `spin.toml` itself.",
    ),
    secret("sandbox_token", SANDBOX_CALLERS, "Shared secret of the sandbox hosts, when they require one."),
    var(
        "store_backend",
        "kv",
        STORE,
        "Where tenant data lives: `kv` (Spin key-value, the `default` store) or `redis` (the server at `redis_url`, through Spin's outbound Redis).",
    ),
    secret("redis_url", STORE, "`redis://[:password@]host:port[/db]` when `store_backend = redis`."),
    var(
        "redis_allowed",
        "",
        &[],
        "The store's allowlist entry for that server, `redis://host:port` (empty: the store may reach no Redis). Used by `spin.toml` itself.",
    ),
    var(
        "cors_allowed_origins",
        "",
        REST_FACE,
        "Origins whose web pages may call the REST face from a browser: comma-separated `scheme://host[:port]`, or `*` for any. Empty: no CORS headers at all.",
    ),
    var("cors_allow_credentials", "false", REST_FACE, "`true` lets those pages send credentials (cookies, `Authorization`); never together with `*`."),
    var(
        "delete_reply",
        "",
        REST_FACE,
        "What a `DELETE` answers: `no-content` (`204`, the default when empty) or `record` (`200` with the deleted record, as `Prefer: return=representation` asks per request; react-admin's `deleteMany` reads each answer's id).",
    ),
    var("max_body_bytes", "1048576", REST_FACE, "Largest request body the REST face accepts, in bytes."),
    var("call_timeout_ms", "10000", ALL_CALLERS, "Deadline of each call between components and to the sandbox hosts, in milliseconds."),
    var("exec_fuel", "", GATEWAY, "Lower the sandbox's fuel budget for every block (empty: the sandbox's own)."),
    var("exec_timeout_ms", "", GATEWAY, "Lower the sandbox's wall-clock budget for every block, in milliseconds (empty: the sandbox's own)."),
    var("planner_timeout_ms", "120000", GATEWAY, "How long the planner's answer may take, LLM calls and repairs included, in milliseconds."),
    var(
        "planner_mode",
        "",
        &["gateway", "store", "planner"],
        "`rules`, `llm` or `auto`; empty picks `auto` when an LLM host with an API key (or on a local address) is configured, `rules` otherwise.",
    ),
    var(
        "rules_direct",
        "true",
        REST_FACE,
        "A request the rules plan runs in the store by the data operations themselves, with no sandbox instance; `false` runs the rules' Python blocks in the sandbox instead (the same answers, slower; the REST suites compare the two).",
    ),
    var("llm_provider", "openai", PLANNER, "`openai` (any OpenAI-compatible Chat Completions server) or `anthropic`."),
    var("llm_scheme", "https", PLANNER, "`https` or `http` (a local server)."),
    var("llm_host", "", PLANNER, "`host[:port]` of the provider, e.g. `api.openai.com`, `api.anthropic.com`, `localhost:11434`."),
    var("llm_model", "", PLANNER, "The model name the provider knows."),
    secret("llm_api_key", PLANNER, "The provider's API key (none for a local server)."),
    var("llm_temperature", "0", PLANNER, "Sampling temperature of every LLM call."),
    var("llm_max_tokens", "1500", PLANNER, "Most tokens one LLM answer may have."),
    var("llm_timeout_ms", "60000", PLANNER, "Deadline of one LLM call, in milliseconds."),
    var(
        "llm_structured_output",
        "auto",
        PLANNER,
        "How a plan's shape is enforced: `auto` (JSON Schema, stepping down to `json_object`, then none, when the server refuses; remembered), `json_schema`, `json_object` or `none`.",
    ),
    var("agent_max_iterations", "6", AGENT, "Model turns one `POST /run` may take at most (1-50)."),
    var("agent_timeout_ms", "120000", AGENT, "Deadline of one `POST /run`, in milliseconds."),
];

/// The definition of `name`, if the app has such a variable.
pub fn variable(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}

/// A variable whose value cannot be used: the wire's type, since a component reports it to another.
pub use anypath_wire::SettingError;

/// Reads variables through a lookup (Spin's `variables::get` in a
/// component), collecting every value it cannot use. An empty value takes
/// the default; an unusable one takes the default too, but is reported
/// ([`Settings::errors`]) so the component can refuse to serve on it.
pub struct Settings<F> {
    lookup: F,
    errors: Vec<SettingError>,
}

impl<F: Fn(&str) -> Option<String>> Settings<F> {
    pub fn new(lookup: F) -> Self {
        Self { lookup, errors: Vec::new() }
    }

    /// The value as set (empty when unset).
    pub fn text(&self, name: &str) -> String {
        (self.lookup)(name).unwrap_or_default()
    }

    /// A number; `default` when empty.
    pub fn number<T: FromStr>(&mut self, name: &str, default: T) -> T {
        self.optional_number(name).unwrap_or(default)
    }

    /// A number, or none when empty.
    pub fn optional_number<T: FromStr>(&mut self, name: &str) -> Option<T> {
        let raw = self.text(name);
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return None;
        }
        match trimmed.parse() {
            Ok(value) => Some(value),
            Err(_) => {
                self.reject(name, &raw, "is not a number");
                None
            }
        }
    }

    /// Milliseconds as a duration; `default_ms` when empty.
    pub fn millis(&mut self, name: &str, default_ms: u64) -> Duration {
        Duration::from_millis(self.number(name, default_ms))
    }

    /// `key:tenant` pairs ([`caller::parse_api_keys`]); none when any entry is malformed.
    pub fn api_keys(&mut self, name: &str) -> Vec<(String, String)> {
        match caller::parse_api_keys(&self.text(name)) {
            Ok(keys) => keys,
            Err(error) => {
                let raw = self.text(name);
                self.reject(name, &raw, &error.to_string());
                Vec::new()
            }
        }
    }

    /// `true` or `false`; `default` when empty.
    pub fn flag(&mut self, name: &str, default: bool) -> bool {
        let raw = self.text(name);
        match raw.trim() {
            "" => default,
            "true" => true,
            "false" => false,
            _ => {
                self.reject(name, &raw, "is neither true nor false");
                default
            }
        }
    }

    /// The browsers' access: `cors_allowed_origins` and
    /// `cors_allow_credentials`; none when either cannot be used.
    pub fn cors(&mut self) -> CorsPolicy {
        let credentials = self.flag("cors_allow_credentials", false);
        let origins = self.text("cors_allowed_origins");
        match CorsPolicy::parse(&origins, credentials) {
            Ok(policy) => policy,
            Err(error) => {
                self.reject("cors_allowed_origins", &origins, &error.to_string());
                CorsPolicy::default()
            }
        }
    }

    /// Records that `raw`, the value of `name`, cannot be used, and why.
    pub fn reject(&mut self, name: &str, raw: &str, reason: &str) {
        let value = if variable(name).is_some_and(|v| v.secret) { "(secret)".to_owned() } else { format!("{raw:?}") };
        self.errors.push(SettingError { variable: name.to_owned(), value, reason: reason.to_owned() });
    }

    /// Every value that could not be used, in reading order.
    pub fn errors(self) -> Vec<SettingError> {
        self.errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &'static [(&'static str, &'static str)]) -> Settings<impl Fn(&str) -> Option<String>> {
        Settings::new(move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn a_typo_in_a_number_is_reported_not_replaced_silently() {
        let mut s = settings(&[("call_timeout_ms", "1O000"), ("llm_max_tokens", " 800 "), ("exec_fuel", "")]);
        assert_eq!(s.millis("call_timeout_ms", 10_000), Duration::from_millis(10_000));
        assert_eq!(s.number("llm_max_tokens", 1500u32), 800);
        assert_eq!(s.optional_number::<u64>("exec_fuel"), None);
        let errors = s.errors();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].variable, "call_timeout_ms");
        assert_eq!(errors[0].value, "\"1O000\"");
    }

    #[test]
    fn a_malformed_api_key_list_is_refused_whole_without_echoing_the_secret() {
        let mut s = settings(&[("api_keys", "k1:alice,broken")]);
        assert!(s.api_keys("api_keys").is_empty());
        let errors = s.errors();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].value, "(secret)");
        assert!(!errors[0].to_string().contains("k1"), "{}", errors[0]);
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VARIABLES.len());
    }
}
