//! Cross-origin access for browsers (seed 000: "auth, CORS"): which origins
//! may call, and the headers a preflight and an actual answer carry. The
//! gateway applies the policy itself (a Spin component has no middleware);
//! the sandbox service hands the same policy to tower-http's `CorsLayer`.
//!
//! Off by default: without allowed origins no answer carries a CORS header,
//! so a page on another origin cannot read any.

/// The request headers the app reads, which a page may send.
pub const ALLOWED_HEADERS: &[&str] = &["content-type", "authorization", "x-session-id", "x-api-key", "x-request-id", "range", "prefer"];
/// The response headers a page may read besides the simple ones.
pub const EXPOSED_HEADERS: &[&str] =
    &["location", "x-request-id", "x-anypath-plan", "server-timing", "retry-after", "x-total-count", "content-range", "link", "preference-applied"];
/// How long a browser may keep a preflight's answer, in seconds.
pub const MAX_AGE_SECONDS: u32 = 600;

/// Which origins may call, and whether with credentials.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CorsPolicy {
    origins: Origins,
    allow_credentials: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Origins {
    /// No CORS headers at all.
    #[default]
    None,
    /// `*`: any origin.
    Any,
    /// These origins, each as a browser serialises it (`https://app.example:8443`).
    List(Vec<String>),
}

/// Why the settings make no policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorsError {
    #[error("{0:?} is not an origin: write scheme://host[:port], e.g. https://app.example.com")]
    NotAnOrigin(String),
    #[error("credentials cannot be allowed for every origin (*): list the origins")]
    CredentialsForAnyOrigin,
}

impl CorsPolicy {
    /// The policy of `origins` (comma-separated origins, `*`, or empty for
    /// none) and `allow_credentials`.
    pub fn parse(origins: &str, allow_credentials: bool) -> Result<Self, CorsError> {
        let entries: Vec<&str> = origins.split(',').map(str::trim).filter(|o| !o.is_empty()).collect();
        let origins = match entries.as_slice() {
            [] => Origins::None,
            ["*"] => Origins::Any,
            listed => Origins::List(listed.iter().map(|o| serialised_origin(o)).collect::<Result<_, _>>()?),
        };
        if origins == Origins::Any && allow_credentials {
            return Err(CorsError::CredentialsForAnyOrigin);
        }
        Ok(Self { origins, allow_credentials })
    }

    /// Whether any origin is allowed.
    pub fn is_enabled(&self) -> bool {
        self.origins != Origins::None
    }

    /// Whether credentials (cookies, `Authorization`) may come along.
    pub fn allows_credentials(&self) -> bool {
        self.allow_credentials
    }

    /// Every origin allowed, or None for any (`*`).
    pub fn listed_origins(&self) -> Option<&[String]> {
        match &self.origins {
            Origins::List(list) => Some(list),
            Origins::None => Some(&[]),
            Origins::Any => None,
        }
    }

    /// `Access-Control-Allow-Origin` for a request from `origin`, when it
    /// may call: `*` for any origin, else the origin itself.
    fn allow_origin(&self, origin: &str) -> Option<String> {
        match &self.origins {
            Origins::None => None,
            Origins::Any => Some("*".to_owned()),
            Origins::List(list) => list.iter().any(|allowed| allowed == origin).then(|| origin.to_owned()),
        }
    }

    /// The headers of an actual answer to a request from `origin` (none
    /// when it has no `Origin` or the origin may not call).
    pub fn response_headers(&self, origin: Option<&str>) -> Vec<(&'static str, String)> {
        let Some(allowed) = origin.and_then(|origin| self.allow_origin(origin)) else { return Vec::new() };
        let mut headers = vec![("access-control-allow-origin", allowed), ("vary", "Origin".to_owned())];
        headers.push(("access-control-expose-headers", EXPOSED_HEADERS.join(", ")));
        if self.allow_credentials {
            headers.push(("access-control-allow-credentials", "true".to_owned()));
        }
        headers
    }

    /// The headers of a preflight's `204` for `origin` on a path that takes
    /// `methods` (the same list as its `Allow`); None when the origin may
    /// not call, and the preflight is then answered as a plain `OPTIONS`.
    pub fn preflight_headers(&self, origin: &str, methods: &[&str]) -> Option<Vec<(&'static str, String)>> {
        let allowed = self.allow_origin(origin)?;
        let mut headers = vec![
            ("access-control-allow-origin", allowed),
            ("vary", "Origin".to_owned()),
            ("access-control-allow-methods", methods.join(", ")),
            ("access-control-allow-headers", ALLOWED_HEADERS.join(", ")),
            ("access-control-max-age", MAX_AGE_SECONDS.to_string()),
        ];
        if self.allow_credentials {
            headers.push(("access-control-allow-credentials", "true".to_owned()));
        }
        Some(headers)
    }
}

/// Whether a request is a CORS preflight: `OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`.
pub fn is_preflight(method: &str, origin: Option<&str>, requested_method: Option<&str>) -> bool {
    method.eq_ignore_ascii_case("OPTIONS") && origin.is_some() && requested_method.is_some()
}

/// `origin` as a browser sends it: scheme, host and a port other than the
/// scheme's own, nothing else.
fn serialised_origin(origin: &str) -> Result<String, CorsError> {
    let not_one = || CorsError::NotAnOrigin(origin.to_owned());
    let url = url::Url::parse(origin).map_err(|_| not_one())?;
    let bare = matches!(url.path(), "" | "/") && url.query().is_none() && url.fragment().is_none() && url.username().is_empty();
    if !bare || !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(not_one());
    }
    Ok(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_origins_means_no_headers() {
        let policy = CorsPolicy::parse("", false).expect("policy");
        assert!(!policy.is_enabled());
        assert!(policy.response_headers(Some("https://a.example")).is_empty());
        assert!(policy.preflight_headers("https://a.example", &["GET"]).is_none());
    }

    #[test]
    fn a_listed_origin_is_echoed_and_another_gets_nothing() {
        let policy = CorsPolicy::parse("https://a.example, http://localhost:8080/", false).expect("policy");
        let headers = policy.response_headers(Some("http://localhost:8080"));
        assert!(headers.contains(&("access-control-allow-origin", "http://localhost:8080".to_owned())), "{headers:?}");
        assert!(headers.iter().any(|(name, value)| *name == "access-control-expose-headers" && value.contains("location")));
        assert!(policy.response_headers(Some("https://evil.example")).is_empty());
        assert!(policy.response_headers(None).is_empty());
        let preflight = policy.preflight_headers("https://a.example", &["GET", "POST", "OPTIONS"]).expect("allowed");
        assert!(preflight.contains(&("access-control-allow-methods", "GET, POST, OPTIONS".to_owned())));
        assert!(policy.preflight_headers("https://a.example.evil", &["GET"]).is_none());
    }

    #[test]
    fn any_origin_is_a_star_and_never_with_credentials() {
        let policy = CorsPolicy::parse("*", false).expect("policy");
        assert_eq!(policy.response_headers(Some("https://x.example"))[0], ("access-control-allow-origin", "*".to_owned()));
        assert_eq!(CorsPolicy::parse("*", true), Err(CorsError::CredentialsForAnyOrigin));
        let with = CorsPolicy::parse("https://a.example", true).expect("policy");
        assert!(with.response_headers(Some("https://a.example")).contains(&("access-control-allow-credentials", "true".to_owned())));
    }

    #[test]
    fn what_is_not_an_origin_is_refused() {
        for bad in ["a.example", "https://a.example/path", "ftp://a.example", "https://a.example?q=1"] {
            assert!(matches!(CorsPolicy::parse(bad, false), Err(CorsError::NotAnOrigin(_))), "{bad}");
        }
    }
}
