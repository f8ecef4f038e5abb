//! Application variables (`SPIN_VARIABLE_*`, then the manifest default) and
//! the `{{ name }}` templates components and allowed hosts use.

use std::collections::{BTreeMap, HashMap};

use crate::manifest::VariableDecl;

/// A variable could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VariableError {
    #[error("variable {0:?} is required but not set (SPIN_VARIABLE_{upper})", upper = .0.to_uppercase())]
    Missing(String),
    #[error("template {0:?} names an undefined variable")]
    Undefined(String),
}

/// The application's variable values, resolved once at start-up.
#[derive(Debug, Clone, Default)]
pub struct Variables {
    values: HashMap<String, String>,
}

impl Variables {
    /// Resolves each declared variable from `env` (`SPIN_VARIABLE_<NAME>`), then its default.
    pub fn resolve(
        decls: &BTreeMap<String, VariableDecl>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, VariableError> {
        let mut values = HashMap::new();
        for (name, decl) in decls {
            let from_env = env(&format!("SPIN_VARIABLE_{}", name.to_uppercase()));
            match from_env.or_else(|| decl.default.clone()) {
                Some(value) => {
                    values.insert(name.clone(), value);
                }
                None if decl.required => return Err(VariableError::Missing(name.clone())),
                None => {}
            }
        }
        Ok(Self { values })
    }

    /// Expands every `{{ name }}` in `template`.
    pub fn expand(&self, template: &str) -> Result<String, VariableError> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").ok_or_else(|| VariableError::Undefined(template.to_owned()))?;
            let name = after[..end].trim();
            let value = self.values.get(name).ok_or_else(|| VariableError::Undefined(name.to_owned()))?;
            out.push_str(value);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(default: Option<&str>, required: bool) -> VariableDecl {
        VariableDecl { default: default.map(str::to_owned), required, secret: false, description: None }
    }

    #[test]
    fn environment_overrides_default_and_required_must_be_set() {
        let mut decls = BTreeMap::new();
        decls.insert("llm_host".to_string(), decl(Some("a.example"), false));
        let vars = Variables::resolve(&decls, |k| (k == "SPIN_VARIABLE_LLM_HOST").then(|| "b.example".to_string())).unwrap();
        assert_eq!(vars.expand("https://{{ llm_host }}").unwrap(), "https://b.example");
        decls.insert("key".to_string(), decl(None, true));
        assert_eq!(Variables::resolve(&decls, |_| None).unwrap_err(), VariableError::Missing("key".into()));
        let vars = Variables::resolve(&BTreeMap::new(), |_| None).unwrap();
        assert!(vars.expand("{{ nope }}").is_err());
    }
}
