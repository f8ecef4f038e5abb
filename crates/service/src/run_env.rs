//! Which environment variables a run may set (`--run-env-allow`).
//!
//! A run's `env` only ever reaches the sandboxed Python: nothing of the
//! host's environment is passed in, and the guest cannot reach the host's.
//! What a name can still do is change how the runtime itself behaves, so
//! the names the runtime sets or CPython reads as its own settings are
//! [`RESERVED`] and always refused. On top of that an operator may list the
//! only names runs may set; the default allows every other name, so E2B's
//! and Jupyter's clients, which pass their users' variables, keep working.

/// Names no run may set, whatever the allowlist says: CPython's own
/// settings (`PYTHON*`), what the runtimes set for themselves, and the
/// host's own requests to the cell code (`ANYPATH_STATE_*`: close the open
/// files before a capture, take the host handles before a restore), which
/// a run given one would answer instead of running its code.
pub const RESERVED: &[&str] = &["PYTHON*", "HOME", "TMPDIR", "MPLBACKEND", "MPLCONFIGDIR", "ANYPATH_STATE_*"];

/// The allowlist of a run's environment names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnvPolicy {
    /// None: any name not reserved; else the names (or `PREFIX*` patterns) allowed.
    listed: Option<Vec<String>>,
}

impl Default for RunEnvPolicy {
    /// Any name that is not reserved.
    fn default() -> Self {
        Self { listed: None }
    }
}

/// A name a run may not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvRefused {
    /// The runtime's own setting.
    #[error("env {name:?} is reserved: the runtime sets it or CPython reads it as its own setting")]
    Reserved { name: String },
    /// Not on the operator's allowlist.
    #[error("env {name:?} is not on this service's allowlist of run environment names (--run-env-allow)")]
    NotAllowed { name: String },
}

/// An allowlist entry that cannot be a name or a `PREFIX*` pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--run-env-allow entry {entry:?} is not a name (letters, digits, '_') or a NAME* prefix, nor '*'")]
pub struct EnvPolicyError {
    pub entry: String,
}

impl RunEnvPolicy {
    /// Parses the flag's value: `*` (the default: any name not reserved),
    /// or names and `PREFIX*` patterns separated by commas; empty allows no
    /// name at all.
    pub fn parse(text: &str) -> Result<Self, EnvPolicyError> {
        let entries: Vec<&str> = text.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
        if entries == ["*"] {
            return Ok(Self::default());
        }
        for entry in &entries {
            let name = entry.strip_suffix('*').unwrap_or(entry);
            let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(EnvPolicyError { entry: (*entry).to_owned() });
            }
        }
        Ok(Self { listed: Some(entries.into_iter().map(str::to_owned).collect()) })
    }

    /// Whether every name may be set; the first refused one otherwise.
    pub fn check<'a>(&self, names: impl IntoIterator<Item = &'a String>) -> Result<(), EnvRefused> {
        for name in names {
            if RESERVED.iter().any(|pattern| matches(pattern, name)) {
                return Err(EnvRefused::Reserved { name: name.clone() });
            }
            if let Some(listed) = &self.listed
                && !listed.iter().any(|pattern| matches(pattern, name))
            {
                return Err(EnvRefused::NotAllowed { name: name.clone() });
            }
        }
        Ok(())
    }

    /// How the policy reads in a log line: `*` or the list.
    pub fn describe(&self) -> String {
        match &self.listed {
            None => "*".to_owned(),
            Some(listed) => listed.join(","),
        }
    }
}

/// `NAME` matches itself; `PREFIX*` every name that starts with `PREFIX`.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_default_allows_any_name_but_the_reserved_ones() {
        let policy = RunEnvPolicy::parse("*").expect("parses");
        assert_eq!(policy, RunEnvPolicy::default());
        assert_eq!(policy.check(&names(&["REGION", "E2B_SANDBOX", "KERNEL_X"])), Ok(()));
        for reserved in ["PYTHONPATH", "PYTHONSTARTUP", "HOME", "TMPDIR", "MPLBACKEND", "MPLCONFIGDIR", "ANYPATH_STATE_PARK", "ANYPATH_STATE_PROLOGUE"] {
            assert_eq!(policy.check(&names(&[reserved])), Err(EnvRefused::Reserved { name: reserved.into() }), "{reserved}");
        }
    }

    #[test]
    fn a_list_allows_its_names_and_prefixes_only() {
        let policy = RunEnvPolicy::parse(" REGION, APP_* ").expect("parses");
        assert_eq!(policy.check(&names(&["REGION", "APP_MODE", "APP_"])), Ok(()));
        assert_eq!(policy.check(&names(&["REGION", "REGIONS"])), Err(EnvRefused::NotAllowed { name: "REGIONS".into() }));
        assert_eq!(policy.describe(), "REGION,APP_*");
        let listed_but_reserved = RunEnvPolicy::parse("PYTHONPATH").expect("parses");
        assert!(matches!(listed_but_reserved.check(&names(&["PYTHONPATH"])), Err(EnvRefused::Reserved { .. })), "reserved wins over the list");
        let none = RunEnvPolicy::parse("").expect("parses");
        assert_eq!(none.check(&names(&[])), Ok(()));
        assert!(none.check(&names(&["REGION"])).is_err(), "an empty list allows no name");
    }

    #[test]
    fn malformed_entries_are_refused() {
        for bad in ["A-B", "*X", "**", "A*B", "x y"] {
            assert!(RunEnvPolicy::parse(bad).is_err(), "{bad}");
        }
    }
}
