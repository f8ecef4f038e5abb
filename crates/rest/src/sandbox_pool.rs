//! The sandbox hosts a component may use (`sandbox_hosts`, a comma-separated
//! `host:port` list) and which of them serves a given key.
//!
//! Hosts are ranked per key by rendezvous (highest-random-weight) hashing:
//! each host scores `sha256(host, key)` and the highest score ranks first. A
//! key keeps its host while that host is in the list, and removing a host
//! moves only the keys it had (each to its own next-ranked host), so the
//! load of a lost host spreads over all the others. [`SandboxPool::first_answer`]
//! walks a ranking until a host answers.

use sha2::{Digest, Sha256};

/// Why a `sandbox_hosts` list cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The list names no host at all.
    #[error("sandbox_hosts is empty: it needs at least one host:port")]
    Empty,
    /// One entry is not `host:port`.
    #[error("sandbox_hosts entry {position} ({entry:?}) is not host:port: {reason}")]
    Malformed {
        /// 1-based position of the entry in the list.
        position: usize,
        entry: String,
        reason: &'static str,
    },
    /// The same host is listed twice.
    #[error("sandbox_hosts names {0} twice")]
    Duplicate(String),
}

/// A checked, non-empty list of sandbox hosts, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPool {
    hosts: Vec<String>,
}

/// The host that answered, its answer, and the hosts ranked before it that did not.
#[derive(Debug)]
pub struct Answered<'p, T, E> {
    pub host: &'p str,
    pub answer: T,
    /// Each host tried first, with why it gave no answer.
    pub skipped: Vec<(&'p str, E)>,
}

impl SandboxPool {
    /// Parses `host:port, host:port, ...` (spaces around entries are ignored).
    pub fn parse(list: &str) -> Result<Self, PoolError> {
        if list.trim().is_empty() {
            return Err(PoolError::Empty);
        }
        let mut hosts: Vec<String> = Vec::new();
        for (index, entry) in list.split(',').enumerate() {
            let entry = entry.trim();
            check_entry(entry).map_err(|reason| PoolError::Malformed { position: index + 1, entry: entry.to_owned(), reason })?;
            let host = entry.to_ascii_lowercase();
            if hosts.contains(&host) {
                return Err(PoolError::Duplicate(host));
            }
            hosts.push(host);
        }
        Ok(Self { hosts })
    }

    /// The hosts, in the order the list gives them.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Every host, best first, for `key`: the rendezvous ranking.
    pub fn ranked(&self, key: &[u8]) -> Vec<&str> {
        let mut scored: Vec<(u64, &str)> = self.hosts.iter().map(|h| (weight(h, key), h.as_str())).collect();
        // Highest weight first; equal weights (practically never) by name, so the order is total.
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.into_iter().map(|(_, host)| host).collect()
    }

    /// Tries the hosts in `key`'s ranking, each at most once, until `attempt`
    /// gives an answer; `attempt` returns `Err` only when the host gave no
    /// answer at all (a transport failure). Without any answer, every host's
    /// failure, in ranking order.
    pub fn first_answer<T, E>(&self, key: &[u8], mut attempt: impl FnMut(&str) -> Result<T, E>) -> Result<Answered<'_, T, E>, Vec<(&str, E)>> {
        let mut skipped = Vec::new();
        for host in self.ranked(key) {
            match attempt(host) {
                Ok(answer) => return Ok(Answered { host, answer, skipped }),
                Err(e) => skipped.push((host, e)),
            }
        }
        Err(skipped)
    }
}

/// What a caller says when [`SandboxPool::first_answer`] got no answer:
/// `no sandbox host answered: a:1 (ConnectionRefused); b:1 (timed out)`.
pub fn no_host_answered<E: std::fmt::Display>(failures: &[(&str, E)]) -> String {
    let each: Vec<String> = failures.iter().map(|(host, e)| format!("{host} ({e})")).collect();
    format!("no sandbox host answered: {}", each.join("; "))
}

/// The rendezvous key of one interpreter session: the tenant and the
/// session id, each length-prefixed so no two pairs share a key.
pub fn session_key(tenant: &str, session_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(16 + tenant.len() + session_id.len());
    for part in [tenant, session_id] {
        key.extend_from_slice(&(part.len() as u64).to_be_bytes());
        key.extend_from_slice(part.as_bytes());
    }
    key
}

/// `host`'s score for `key`: the first 8 bytes of `sha256(len(host) || host || key)`.
fn weight(host: &str, key: &[u8]) -> u64 {
    let digest = Sha256::new()
        .chain_update((host.len() as u64).to_be_bytes())
        .chain_update(host.as_bytes())
        .chain_update(key)
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// `host:port`: a DNS name or IPv4 address (letters, digits, `.`, `-`) or a
/// bracketed IPv6 address, then a port from 1 to 65535.
fn check_entry(entry: &str) -> Result<(), &'static str> {
    if entry.is_empty() {
        return Err("the entry is empty");
    }
    let (host, port) = entry.rsplit_once(':').ok_or("the port is missing")?;
    match port.parse::<u16>() {
        Ok(0) | Err(_) => return Err("the port is not a number from 1 to 65535"),
        Ok(_) => {}
    }
    let valid_host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => !v6.is_empty() && v6.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.'),
        None => {
            !host.is_empty()
                && !host.starts_with(['.', '-'])
                && !host.ends_with('-')
                && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        }
    };
    if valid_host { Ok(()) } else { Err("the host is not a name or an IP address") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(list: &str) -> SandboxPool {
        SandboxPool::parse(list).expect("a valid list")
    }

    #[test]
    fn parses_lists_and_names_what_is_wrong() {
        assert_eq!(pool(" 127.0.0.1:3001, sandbox-b.internal:3002 ,[::1]:3003").hosts(), ["127.0.0.1:3001", "sandbox-b.internal:3002", "[::1]:3003"]);
        assert_eq!(SandboxPool::parse("   "), Err(PoolError::Empty));
        for (list, position, reason) in [
            ("a:1,,b:2", 2, "the entry is empty"),
            ("a:1,", 2, "the entry is empty"),
            ("127.0.0.1", 1, "the port is missing"),
            ("a:1,b:0", 2, "the port is not a number from 1 to 65535"),
            ("a:70000", 1, "the port is not a number from 1 to 65535"),
            ("http://a:1", 1, "the host is not a name or an IP address"),
            ("a/b:1", 1, "the host is not a name or an IP address"),
            (":3001", 1, "the host is not a name or an IP address"),
            ("[]:3001", 1, "the host is not a name or an IP address"),
        ] {
            match SandboxPool::parse(list) {
                Err(PoolError::Malformed { position: p, reason: r, .. }) => assert_eq!((p, r), (position, reason), "{list}"),
                other => panic!("{list}: expected a malformed entry, got {other:?}"),
            }
        }
        assert_eq!(SandboxPool::parse("A:1,a:1"), Err(PoolError::Duplicate("a:1".into())));
        let message = SandboxPool::parse("a:1,b").unwrap_err().to_string();
        assert_eq!(message, "sandbox_hosts entry 2 (\"b\") is not host:port: the port is missing");
    }

    #[test]
    fn ranking_is_stable_and_holds_every_host_once() {
        let hosts = pool("10.0.0.1:3001,10.0.0.2:3001,10.0.0.3:3001");
        let reordered = pool("10.0.0.3:3001,10.0.0.1:3001,10.0.0.2:3001");
        for i in 0..200 {
            let key = format!("request-{i}");
            let ranking = hosts.ranked(key.as_bytes());
            assert_eq!(ranking, hosts.ranked(key.as_bytes()), "the same key ranks the same");
            assert_eq!(ranking, reordered.ranked(key.as_bytes()), "the list's order does not matter");
            let mut sorted = ranking.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, ["10.0.0.1:3001", "10.0.0.2:3001", "10.0.0.3:3001"]);
        }
        assert_ne!(session_key("ab", "c"), session_key("a", "bc"));
    }

    /// The hash is part of the contract: a session's host must be the same on
    /// every gateway build, native or wasm, or sessions would lose their state.
    #[test]
    fn rankings_are_pinned() {
        let hosts = pool("10.0.0.1:3001,10.0.0.2:3001,10.0.0.3:3001");
        assert_eq!(hosts.ranked(&session_key("tenant", "a")), ["10.0.0.1:3001", "10.0.0.2:3001", "10.0.0.3:3001"]);
        assert_eq!(hosts.ranked(&session_key("tenant", "d")), ["10.0.0.3:3001", "10.0.0.1:3001", "10.0.0.2:3001"]);
    }

    #[test]
    fn keys_spread_roughly_evenly() {
        let hosts = pool("10.0.0.1:3001,10.0.0.2:3001,10.0.0.3:3001");
        let mut counts = [0usize; 3];
        for i in 0..3000 {
            let first = hosts.ranked(format!("key-{i}").as_bytes())[0];
            let index = hosts.hosts().iter().position(|h| h == first).expect("a listed host");
            counts[index] += 1;
        }
        for (host, count) in hosts.hosts().iter().zip(counts) {
            assert!((600..=1410).contains(&count), "{host} got {count} of 3000 keys: {counts:?}");
        }
    }

    #[test]
    fn removing_a_host_moves_only_its_keys() {
        let three = pool("10.0.0.1:3001,10.0.0.2:3001,10.0.0.3:3001");
        let two = pool("10.0.0.1:3001,10.0.0.3:3001");
        let mut moved = 0;
        for i in 0..3000 {
            let key = session_key("tenant", &format!("session-{i}"));
            let before = three.ranked(&key);
            let after = two.ranked(&key);
            if before[0] == "10.0.0.2:3001" {
                moved += 1;
                assert_eq!(after[0], before[1], "a key of the removed host goes to its next-ranked host");
            } else {
                assert_eq!(after[0], before[0], "a key of a remaining host stays");
            }
        }
        assert!(moved > 0);
    }

    #[test]
    fn first_answer_tries_each_host_once_in_ranking_order() {
        let hosts = pool("a:1,b:1,c:1");
        let ranking = hosts.ranked(b"k");
        let mut tried = Vec::new();
        let answered = hosts
            .first_answer(b"k", |host| {
                tried.push(host.to_owned());
                if host == ranking[2] { Ok("answer") } else { Err("refused") }
            })
            .expect("the last host answers");
        assert_eq!(tried, ranking);
        assert_eq!((answered.host, answered.answer), (ranking[2], "answer"));
        assert_eq!(answered.skipped, vec![(ranking[0], "refused"), (ranking[1], "refused")]);

        let mut calls = 0;
        let failed = hosts.first_answer(b"k", |_| -> Result<(), &str> {
            calls += 1;
            Err("down")
        });
        assert_eq!(calls, 3, "every host once, no more");
        assert_eq!(failed.unwrap_err().len(), 3);

        let first = hosts.first_answer(b"k", |_| Ok::<_, ()>(1)).expect("answered");
        assert_eq!((first.host, first.skipped.len()), (ranking[0], 0));
    }
}
