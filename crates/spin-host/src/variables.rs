//! Application variables (`SPIN_VARIABLE_*`, then the manifest default) and
//! the `{{ name }}` templates components and allowed hosts use, parsed as
//! Spin's `spin_expressions::Template` parses them.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::ids::LowerSnakeId;
use crate::manifest::VariableDecl;

/// A variable or template could not be resolved; the messages are Spin's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VariableError {
    /// Spin: `no provider resolved required variable(s)`.
    #[error("no provider resolved required variable(s): [Key({0:?})] (set SPIN_VARIABLE_{upper})", upper = .0.to_uppercase())]
    Missing(String),
    #[error("invalid variable template: unmatched '{{{{' in template")]
    Unmatched,
    #[error("invalid variable template: unknown variable {0:?}")]
    Unknown(String),
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// The trimmed text between `{{` and `}}`.
    Variable(String),
}

/// A string with `{{ variable }}` expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    /// Splits `text` into literals and expressions; an opening `{{` without
    /// its `}}` is an error, a lone `}}` is literal text.
    pub fn parse(text: &str) -> Result<Self, VariableError> {
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("{{") {
                let (expression, tail) = after.split_once("}}").ok_or(VariableError::Unmatched)?;
                parts.push(Part::Variable(expression.trim().to_owned()));
                rest = tail;
            } else {
                let end = rest.find("{{").unwrap_or(rest.len());
                parts.push(Part::Literal(rest[..end].to_owned()));
                rest = &rest[end..];
            }
        }
        Ok(Self { parts })
    }

    /// Whether the template has no expression.
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    /// The variable names the template refers to.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Variable(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Fills in every expression with `lookup`; a name it does not know is an error.
    pub fn render(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<String, VariableError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Variable(name) => out.push_str(&lookup(name).ok_or_else(|| VariableError::Unknown(name.clone()))?),
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Template {
    /// As Spin prints a template in its messages: `{{ name }}` with single spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Literal(text) => f.write_str(text)?,
                Part::Variable(name) => write!(f, "{{{{ {name} }}}}")?,
            }
        }
        Ok(())
    }
}

/// The application's variable values, resolved once at start-up.
#[derive(Debug, Clone, Default)]
pub struct Variables {
    values: HashMap<String, String>,
}

impl Variables {
    /// Resolves each declared variable from `env` (`SPIN_VARIABLE_<NAME>`), then its default.
    pub fn resolve(
        decls: &BTreeMap<LowerSnakeId, VariableDecl>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, VariableError> {
        let mut values = HashMap::new();
        for (name, decl) in decls {
            let from_env = env(&format!("SPIN_VARIABLE_{}", name.as_str().to_uppercase()));
            match from_env.or_else(|| decl.default.clone()) {
                Some(value) => {
                    values.insert(name.to_string(), value);
                }
                None => return Err(VariableError::Missing(name.to_string())),
            }
        }
        Ok(Self { values })
    }

    /// Only the declared defaults: what Spin checks templates with when it loads an app.
    pub fn defaults(decls: &BTreeMap<LowerSnakeId, VariableDecl>) -> Self {
        let values = decls.iter().filter_map(|(name, decl)| Some((name.to_string(), decl.default.clone()?))).collect();
        Self { values }
    }

    /// The value of `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<String> {
        self.values.get(name).cloned()
    }

    /// Parses `template` and fills in every `{{ name }}`.
    pub fn expand(&self, template: &str) -> Result<String, VariableError> {
        Template::parse(template)?.render(|name| self.get(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(default: Option<&str>, required: bool) -> VariableDecl {
        VariableDecl { default: default.map(str::to_owned), required, secret: false, description: None }
    }

    fn name(text: &str) -> LowerSnakeId {
        LowerSnakeId::parse(text).unwrap()
    }

    #[test]
    fn environment_overrides_default_and_required_must_be_set() {
        let mut decls = BTreeMap::new();
        decls.insert(name("llm_host"), decl(Some("a.example"), false));
        let vars = Variables::resolve(&decls, |k| (k == "SPIN_VARIABLE_LLM_HOST").then(|| "b.example".to_string())).unwrap();
        assert_eq!(vars.expand("https://{{ llm_host }}").unwrap(), "https://b.example");
        assert_eq!(vars.expand("https://{{llm_host}}").unwrap(), "https://b.example", "Spin trims the expression");
        decls.insert(name("key"), decl(None, true));
        assert_eq!(Variables::resolve(&decls, |_| None).unwrap_err(), VariableError::Missing("key".into()));
        let vars = Variables::resolve(&BTreeMap::new(), |_| None).unwrap();
        assert_eq!(vars.expand("{{ nope }}").unwrap_err().to_string(), r#"invalid variable template: unknown variable "nope""#);
    }

    #[test]
    fn templates_parse_as_spin_parses_them() {
        let unmatched = Template::parse("http://{{ host").unwrap_err();
        assert_eq!(unmatched.to_string(), "invalid variable template: unmatched '{{' in template");
        assert!(Template::parse("a }} b").unwrap().is_literal(), "a lone '}}' is text");
        let template = Template::parse("{{scheme}}://{{  host }}:80").unwrap();
        assert_eq!(template.to_string(), "{{ scheme }}://{{ host }}:80");
        assert_eq!(template.names().collect::<Vec<_>>(), ["scheme", "host"]);
    }
}
