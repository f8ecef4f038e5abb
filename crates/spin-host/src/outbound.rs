//! `allowed_outbound_hosts`: which URLs a component may call.
//!
//! The grammar, the forgiving of empty template results and the messages
//! follow Spin's `outbound-networking-config` (`allowed_hosts.rs`), so an entry
//! `spin up` refuses is refused here with the same words: `scheme://host[:port]`
//! where the scheme is letters or `*`; the host `*`, `self`, an IP network, a
//! name or `*.` before a domain; the port a number, `*`, or a range `a..b`
//! (end excluded), by default the scheme's well-known port.

use std::ops::Range;

use crate::variables::{Template, VariableError, Variables};

/// The service-chaining domain: `http://<component>.spin.internal`.
const SERVICE_CHAINING_SUFFIX: &str = ".spin.internal";

/// Why one entry is not a valid `allowed_outbound_hosts` item.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EntryError {
    #[error(
        "{0:?} is not an allowed outbound host format.\nHosts must be in the form <scheme>://<host>[:<port>], with '*' wildcards allowed for each.\nIf you intended to allow all outbound networking, you can use '*://*:*' - this will obviate all network sandboxing."
    )]
    NoFormat(String),
    #[error("{0:?} does not contain a scheme (e.g., 'http://' or '*://')")]
    NoScheme(String),
    #[error("{0:?} has a path but is not allowed to")]
    Path(String),
    #[error("Invalid allowed host port {port:?}: {reason}")]
    Port { port: String, reason: String },
    #[error("Invalid allowed host scheme {scheme:?}: {reason}")]
    Scheme { scheme: String, reason: &'static str },
    #[error("Invalid allowed host {host:?}: {reason}")]
    Host { host: String, reason: String },
    #[error("'insecure:allow-all' is not allowed - use '*://*:*' instead if you really want to allow all outbound traffic'")]
    InsecureAllowAll,
    #[error(transparent)]
    Template(#[from] VariableError),
    /// Spin checks a templated entry with the variables' defaults at load time.
    #[error("using default variable value(s) with template {template:?} results in invalid config {resolved:?}: {cause}")]
    WithDefaults { template: String, resolved: String, cause: Box<EntryError> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Schemes {
    Any,
    One(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Hosts {
    Any,
    /// `*.example.com`, kept as `.example.com`.
    AnySubdomain(String),
    /// `self`: relative requests, which this host's components never make.
    ToSelf,
    Literal(url::Host),
    Network(ip_network::IpNetwork),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ports {
    Any,
    One(u16),
    Range(Range<u16>),
}

/// One parsed `scheme://host[:port]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedHost {
    scheme: Schemes,
    host: Hosts,
    port: Ports,
}

/// A component's outbound allowlist; empty allows nothing.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    entries: Vec<AllowedHost>,
}

fn well_known_port(scheme: &str) -> Option<u16> {
    match scheme {
        "postgres" => Some(5432),
        "mysql" => Some(3306),
        "redis" => Some(6379),
        "mqtt" => Some(1883),
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

impl AllowedHost {
    fn parse(entry: &str) -> Result<Self, EntryError> {
        let url = entry.trim();
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(match url {
                "*" | ":" | "" | "?" => EntryError::NoFormat(url.to_owned()),
                _ => EntryError::NoScheme(url.to_owned()),
            });
        };
        let (host, port) = match rest.rsplit_once(':') {
            None => (rest, ""),
            Some((host, "")) => (host, ""),
            Some((host, tail)) if parse_host(rest).is_err() => match tail.split_once('/') {
                Some((_, path)) if !path.is_empty() => return Err(EntryError::Path(url.to_owned())),
                Some((port, _)) => (host, port),
                None => (host, tail),
            },
            Some(_) => (rest, ""),
        };
        let port = parse_port(port, scheme).map_err(|reason| EntryError::Port { port: port.to_owned(), reason })?;
        let scheme = parse_scheme(scheme).map_err(|reason| EntryError::Scheme { scheme: scheme.to_owned(), reason })?;
        let host = parse_host(host).map_err(|reason| EntryError::Host { host: host.to_owned(), reason })?;
        Ok(Self { scheme, host, port })
    }

    fn allows(&self, scheme: &str, host: &url::Host, port: Option<u16>) -> bool {
        let scheme_ok = match &self.scheme {
            Schemes::Any => true,
            Schemes::One(s) => s == scheme,
        };
        let host_ok = match (&self.host, host) {
            (Hosts::Any, _) => true,
            (Hosts::AnySubdomain(suffix), url::Host::Domain(domain)) => domain.ends_with(suffix.as_str()),
            (Hosts::Literal(literal), host) => literal == host,
            (Hosts::Network(net), url::Host::Ipv4(ip)) => net.contains(std::net::IpAddr::V4(*ip)),
            (Hosts::Network(net), url::Host::Ipv6(ip)) => net.contains(std::net::IpAddr::V6(*ip)),
            _ => false,
        };
        let port_ok = match (&self.port, port.or_else(|| well_known_port(scheme))) {
            (Ports::Any, _) => true,
            (_, None) => false,
            (Ports::One(p), Some(port)) => *p == port,
            (Ports::Range(range), Some(port)) => range.contains(&port),
        };
        scheme_ok && host_ok && port_ok
    }
}

fn parse_scheme(scheme: &str) -> Result<Schemes, &'static str> {
    if scheme == "*" {
        return Ok(Schemes::Any);
    }
    if scheme.starts_with('{') {
        return Err("scheme lists are not supported");
    }
    if scheme.chars().any(|c| !c.is_alphabetic()) {
        return Err("only alphabetic characters are allowed");
    }
    Ok(Schemes::One(scheme.to_owned()))
}

fn parse_host(host: &str) -> Result<Hosts, String> {
    let host = host.trim();
    match host {
        "*" => return Ok(Hosts::Any),
        "self" | "self.alt" => return Ok(Hosts::ToSelf),
        _ => {}
    }
    if host.starts_with('{') {
        return Err(if host.ends_with('}') { "host lists are not yet supported" } else { "Condition failed: `host.ends_with('}')`" }.into());
    }
    if let Ok(network) = ip_network::IpNetwork::from_str_truncate(host) {
        return Ok(Hosts::Network(network));
    }
    let host = host.strip_suffix('/').unwrap_or(host);
    if host.contains('/') {
        return Err("must not include a path".into());
    }
    if let Some(domain) = host.strip_prefix("*.") {
        if domain.contains('*') {
            return Err("wildcards are allowed only as prefixes".into());
        }
        return match url::Host::parse(domain) {
            Ok(url::Host::Domain(domain)) => Ok(Hosts::AnySubdomain(format!(".{domain}"))),
            Ok(_) => Err("wildcard suffix must be a domain".into()),
            Err(e) => Err(format!("invalid wildcard host \"*.{domain}\": {e}")),
        };
    }
    if host.contains('*') {
        return Err("wildcards are allowed only as subdomains".into());
    }
    url::Host::parse(host).map(Hosts::Literal).map_err(|e| e.to_string())
}

fn parse_port(port: &str, scheme: &str) -> Result<Ports, String> {
    if port.is_empty() {
        return well_known_port(scheme).map(Ports::One).ok_or_else(|| {
            format!("no port was provided and the scheme {scheme:?} does not have a known default port number")
        });
    }
    if port == "*" {
        return Ok(Ports::Any);
    }
    if port.starts_with('{') {
        return Err("port lists are not yet supported".into());
    }
    let number = |text: &str, what: &str| text.parse::<u16>().map_err(|e| format!("{what} {port:?} {}: {e}", if what == "port" { "is not a number" } else { "contains non-number" }));
    match port.split_once("..") {
        Some((start, end)) => Ok(Ports::Range(number(start, "port range")?..number(end, "port range")?)),
        None => Ok(Ports::One(number(port, "port")?)),
    }
}

/// Spin forgives a template that resolves to nothing only in these shapes
/// (an optional endpoint left empty); anything else must parse.
fn parse_or_skip(resolved: &str) -> Result<Option<AllowedHost>, EntryError> {
    if resolved.is_empty() || resolved == "http://" || resolved == "https://" {
        Ok(None)
    } else {
        AllowedHost::parse(resolved).map(Some)
    }
}

impl AllowedHosts {
    /// What `spin up` checks when it loads the app: literal entries must
    /// parse, and a templated entry whose variables all have defaults must
    /// parse with those defaults (or resolve to an empty endpoint).
    pub fn validate(entries: &[String], defaults: &Variables) -> Result<(), EntryError> {
        if let [only] = entries
            && only == "insecure:allow-all"
        {
            return Err(EntryError::InsecureAllowAll);
        }
        for entry in entries {
            let template = Template::parse(entry)?;
            if template.is_literal() {
                AllowedHost::parse(entry)?;
                continue;
            }
            // A variable without a default cannot be checked before it is set.
            let Ok(resolved) = template.render(|name| defaults.get(name)) else { continue };
            parse_or_skip(&resolved).map_err(|source| EntryError::WithDefaults {
                template: template.to_string(),
                resolved,
                cause: Box::new(source),
            })?;
        }
        Ok(())
    }

    /// The allowlist with the app's variable values, as Spin builds it for an
    /// instance; `*.spin.internal` stands for each of `components`.
    pub fn resolve(entries: &[String], values: &Variables, components: &[String]) -> Result<Self, EntryError> {
        let mut parsed = Vec::new();
        for entry in entries {
            let template = Template::parse(entry)?;
            let host = if template.is_literal() {
                Some(AllowedHost::parse(entry)?)
            } else {
                parse_or_skip(&template.render(|name| values.get(name))?)?
            };
            let Some(host) = host else { continue };
            match &host.host {
                Hosts::AnySubdomain(suffix) if suffix == SERVICE_CHAINING_SUFFIX => {
                    for component in components {
                        let domain = url::Host::Domain(format!("{component}{SERVICE_CHAINING_SUFFIX}"));
                        parsed.push(AllowedHost { host: Hosts::Literal(domain), ..host.clone() });
                    }
                }
                _ => parsed.push(host),
            }
        }
        Ok(Self { entries: parsed })
    }

    /// Whether `scheme://host:port` may be called (no port: the scheme's own).
    pub fn allows(&self, scheme: &str, host: &str, port: Option<u16>) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let Ok(host) = url::Host::parse(host) else { return false };
        let scheme = scheme.to_ascii_lowercase();
        self.entries.iter().any(|e| e.allows(&scheme, &host, port))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ids::LowerSnakeId;
    use crate::manifest::VariableDecl;

    fn hosts(entries: &[&str]) -> AllowedHosts {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        AllowedHosts::resolve(&entries, &Variables::default(), &["store".into(), "planner".into()]).unwrap()
    }

    fn refused(entry: &str) -> String {
        AllowedHost::parse(entry).unwrap_err().to_string()
    }

    fn defaults(pairs: &[(&str, &str)]) -> Variables {
        let decls: BTreeMap<LowerSnakeId, VariableDecl> = pairs
            .iter()
            .map(|(k, v)| {
                let decl = VariableDecl { default: Some(v.to_string()), required: false, secret: false, description: None };
                (LowerSnakeId::parse(k).unwrap(), decl)
            })
            .collect();
        Variables::defaults(&decls)
    }

    #[test]
    fn exact_wildcard_network_and_port_rules() {
        let allowed = hosts(&[
            "https://api.openai.com",
            "http://*.spin.internal",
            "http://127.0.0.1:3001",
            "http://localhost:8000..8010",
            "tcp://10.0.0.0/8:*",
        ]);
        assert!(allowed.allows("https", "api.openai.com", None));
        assert!(!allowed.allows("http", "api.openai.com", None));
        assert!(!allowed.allows("https", "api.openai.com", Some(8443)));
        assert!(allowed.allows("http", "store.spin.internal", None));
        assert!(!allowed.allows("http", "gateway.spin.internal", None), "only the app's components");
        assert!(allowed.allows("http", "127.0.0.1", Some(3001)));
        assert!(!allowed.allows("http", "127.0.0.1", Some(3002)));
        assert!(allowed.allows("http", "localhost", Some(8009)));
        assert!(!allowed.allows("http", "localhost", Some(8010)), "a range excludes its end");
        assert!(allowed.allows("tcp", "10.1.2.3", Some(9)));
        assert!(!allowed.allows("tcp", "11.1.2.3", Some(9)));
        let redis = hosts(&["redis://cache.internal", "redis://127.0.0.1:7001"]);
        assert!(redis.allows("redis", "cache.internal", Some(6379)), "redis' default port");
        assert!(!redis.allows("redis", "cache.internal", Some(6380)));
        assert!(!redis.allows("http", "127.0.0.1", Some(7001)), "the scheme is part of the grant");
        assert!(!AllowedHosts::default().allows("http", "example.com", None));
    }

    #[test]
    fn malformed_entries_are_refused_with_spins_words() {
        assert!(refused("example.com").starts_with(r#""example.com" does not contain a scheme"#));
        assert!(refused("*").starts_with(r#""*" is not an allowed outbound host format."#));
        assert_eq!(refused("http://"), r#"Invalid allowed host "": empty host"#);
        assert_eq!(refused("redis://"), r#"Invalid allowed host "": empty host"#);
        assert_eq!(refused("http://127.0.0.1:3001-3010"), r#"Invalid allowed host port "3001-3010": port "3001-3010" is not a number: invalid digit found in string"#);
        assert_eq!(refused("tcp://example.com"), r#"Invalid allowed host port "": no port was provided and the scheme "tcp" does not have a known default port number"#);
        assert_eq!(refused("h2c://example.com:80"), r#"Invalid allowed host scheme "h2c": only alphabetic characters are allowed"#);
        assert_eq!(refused("https://example.com:443/path"), r#""https://example.com:443/path" has a path but is not allowed to"#);
        assert_eq!(refused("https://exa*mple.com"), r#"Invalid allowed host "exa*mple.com": wildcards are allowed only as subdomains"#);
        assert!(AllowedHost::parse(" https://example.com/ ").is_ok(), "trimmed, one trailing slash");
        assert!(AllowedHost::parse("*://*:*").is_ok());
    }

    #[test]
    fn templates_are_checked_with_defaults_and_empty_endpoints_skipped() {
        let empty = defaults(&[("host", ""), ("scheme", "https")]);
        let check = |entry: &str, vars: &Variables| AllowedHosts::validate(&[entry.to_owned()], vars);
        assert_eq!(check("http://{{ host }}", &empty), Ok(()));
        assert_eq!(check("{{ scheme }}://{{ host }}", &empty), Ok(()));
        assert_eq!(check("{{host}}", &empty), Ok(()));
        let redis = check("redis://{{ host }}", &empty).unwrap_err();
        assert_eq!(
            redis.to_string(),
            r#"using default variable value(s) with template "redis://{{ host }}" results in invalid config "redis://": Invalid allowed host "": empty host"#
        );
        assert_eq!(check("http://{{ undeclared }}", &empty), Ok(()), "checked only when every variable has a default");
        assert_eq!(check("http://{{ host", &empty), Err(EntryError::Template(VariableError::Unmatched)));
        assert_eq!(AllowedHosts::validate(&["insecure:allow-all".into()], &empty), Err(EntryError::InsecureAllowAll));
        let ranges = defaults(&[("pool", "127.0.0.1:3001-3010")]);
        assert!(check("http://{{ pool }}", &ranges).is_err(), "a dash is no port range");
    }
}
