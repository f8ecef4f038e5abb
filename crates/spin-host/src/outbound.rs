//! `allowed_outbound_hosts`: which URLs a component may call.

/// One parsed `scheme://host[:port]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedHost {
    scheme: String,
    host: String,
    port: PortRule,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PortRule {
    Default,
    Any,
    Range(u16, u16),
}

/// A component's outbound allowlist; empty allows nothing.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    entries: Vec<AllowedHost>,
}

/// An entry that cannot be parsed.
#[derive(Debug, thiserror::Error)]
#[error("invalid allowed_outbound_hosts entry {0:?}: expected scheme://host[:port]")]
pub struct InvalidEntry(pub String);

impl AllowedHosts {
    /// Parses expanded entries; an entry whose host is empty (a template that
    /// expanded to nothing) is dropped, as in Spin.
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, InvalidEntry> {
        let mut parsed = Vec::new();
        for entry in entries {
            if entry.trim().is_empty() {
                continue;
            }
            let (scheme, rest) = entry.split_once("://").ok_or_else(|| InvalidEntry(entry.to_owned()))?;
            let rest = rest.trim_end_matches('/');
            if rest.is_empty() {
                continue;
            }
            let (host, port) = match rest.rsplit_once(':') {
                Some((host, "*")) => (host, PortRule::Any),
                Some((host, port)) => match port.split_once('-') {
                    Some((a, b)) => (host, PortRule::Range(num(a, entry)?, num(b, entry)?)),
                    None => {
                        let p = num(port, entry)?;
                        (host, PortRule::Range(p, p))
                    }
                },
                None => (rest, PortRule::Default),
            };
            if host.is_empty() || scheme.is_empty() {
                return Err(InvalidEntry(entry.to_owned()));
            }
            parsed.push(AllowedHost { scheme: scheme.to_ascii_lowercase(), host: host.to_ascii_lowercase(), port });
        }
        Ok(Self { entries: parsed })
    }

    /// Whether `scheme://host:port` may be called.
    pub fn allows(&self, scheme: &str, host: &str, port: Option<u16>) -> bool {
        let scheme = scheme.to_ascii_lowercase();
        let host = host.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "https" => 443,
            "redis" | "rediss" => 6379,
            _ => 80,
        };
        let port = port.unwrap_or(default_port);
        self.entries.iter().any(|e| {
            (e.scheme == "*" || e.scheme == scheme)
                && host_matches(&e.host, &host)
                && match e.port {
                    PortRule::Any => true,
                    PortRule::Default => port == default_port,
                    PortRule::Range(a, b) => (a..=b).contains(&port),
                }
        })
    }
}

fn num(text: &str, entry: &str) -> Result<u16, InvalidEntry> {
    text.parse().map_err(|_| InvalidEntry(entry.to_owned()))
}

fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        _ if pattern == "*" => true,
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_wildcard_and_port_rules() {
        let hosts = AllowedHosts::parse([
            "https://api.openai.com",
            "http://*.spin.internal",
            "http://127.0.0.1:3001",
            "http://localhost:8000-8010",
            "http://",
        ])
        .unwrap();
        assert!(hosts.allows("https", "api.openai.com", None));
        assert!(!hosts.allows("http", "api.openai.com", None));
        assert!(!hosts.allows("https", "api.openai.com", Some(8443)));
        assert!(hosts.allows("http", "store.spin.internal", None));
        assert!(!hosts.allows("http", "spin.internal", None));
        assert!(hosts.allows("http", "127.0.0.1", Some(3001)));
        assert!(!hosts.allows("http", "127.0.0.1", Some(3002)));
        assert!(hosts.allows("http", "localhost", Some(8005)));
        let redis = AllowedHosts::parse(["redis://cache.internal", "redis://127.0.0.1:7001"]).unwrap();
        assert!(redis.allows("redis", "cache.internal", Some(6379)), "redis' default port");
        assert!(!redis.allows("redis", "cache.internal", Some(6380)));
        assert!(redis.allows("redis", "127.0.0.1", Some(7001)));
        assert!(!redis.allows("http", "127.0.0.1", Some(7001)), "the scheme is part of the grant");
        assert!(!AllowedHosts::default().allows("http", "example.com", None));
        assert!(AllowedHosts::parse(["example.com"]).is_err());
    }
}
