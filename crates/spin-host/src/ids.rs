//! Spin's identifier rules: component ids are kebab-case (`KebabId`),
//! variable names snake_case in lower case (`LowerSnakeId`), key-value labels
//! either. The checks and their messages follow `spin_serde::Id`, so a name
//! Spin refuses is refused here with the same words.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// Checks `id` as words separated by `delim`; `lower` forbids UPPERCASE words.
fn check(id: &str, delim: char, lower: bool) -> Result<(), String> {
    if id.is_empty() {
        return Err("empty".into());
    }
    let wrong = if delim == '_' { '-' } else { '_' };
    if id.contains(wrong) {
        return Err(format!("words must be separated with {delim:?}, not {wrong:?}"));
    }
    for word in id.split(delim) {
        let mut chars = word.chars();
        let Some(first) = chars.next() else {
            return Err(format!("{delim:?}-separated words must not be empty"));
        };
        if !first.is_ascii_alphabetic() {
            return Err(format!("{delim:?}-separated words must start with an ASCII letter; got {first:?}"));
        }
        let upper = first.is_ascii_uppercase();
        for ch in chars {
            if ch.is_ascii_digit() {
                continue;
            }
            if !ch.is_ascii_alphanumeric() {
                return Err(format!("{delim:?}-separated words may only contain alphanumeric ASCII; got {ch:?}"));
            }
            if ch.is_ascii_uppercase() != upper {
                return Err(format!("{delim:?}-separated words must be all lowercase or all UPPERCASE; got {word:?}"));
            }
        }
        if lower && upper {
            return Err(format!("Lower-case identifiers must be all lowercase; got {id:?}"));
        }
    }
    Ok(())
}

/// A component id: kebab-case words, each all lowercase or all UPPERCASE.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KebabId(String);

/// A variable name: snake_case words, all lowercase.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LowerSnakeId(String);

macro_rules! id_type {
    ($name:ident, $delim:expr, $lower:expr) => {
        impl $name {
            /// Checks `id` against Spin's rule for this kind of name.
            pub fn parse(id: &str) -> Result<Self, String> {
                check(id, $delim, $lower).map(|()| Self(id.to_owned()))
            }

            /// The name as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Self::parse(&text).map_err(serde::de::Error::custom)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

id_type!(KebabId, '-', false);
id_type!(LowerSnakeId, '_', true);

/// A key-value store label: kebab-case or snake_case (Spin's `kebab_or_snake_case`).
pub fn check_store_label(label: &str) -> Result<(), String> {
    if check(label, '-', false).is_ok() || check(label, '_', false).is_ok() {
        Ok(())
    } else {
        Err("expected kebab-case or snake_case".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names_follow_spins_lower_snake_rule() {
        assert!(LowerSnakeId::parse("foo1_bar2").is_ok());
        let refused = |name: &str| LowerSnakeId::parse(name).unwrap_err();
        assert_eq!(refused("Foo"), r#"'_'-separated words must be all lowercase or all UPPERCASE; got "Foo""#);
        assert_eq!(refused("FOO"), r#"Lower-case identifiers must be all lowercase; got "FOO""#);
        assert_eq!(refused("foo-bar"), "words must be separated with '_', not '-'");
        assert_eq!(refused("foo_1"), "'_'-separated words must start with an ASCII letter; got '1'");
        assert_eq!(refused("foo__bar"), "'_'-separated words must not be empty");
        assert_eq!(refused("foo.bar"), "'_'-separated words may only contain alphanumeric ASCII; got '.'");
    }

    #[test]
    fn component_ids_are_kebab_case_and_may_be_upper_case() {
        assert!(KebabId::parse("python-runner").is_ok());
        assert!(KebabId::parse("STORE").is_ok());
        assert_eq!(KebabId::parse("my_store").unwrap_err(), "words must be separated with '-', not '_'");
        assert_eq!(KebabId::parse("store-1").unwrap_err(), "'-'-separated words must start with an ASCII letter; got '1'");
    }

    #[test]
    fn store_labels_are_kebab_or_snake_case() {
        assert!(check_store_label("default").is_ok());
        assert!(check_store_label("plan_cache").is_ok());
        assert!(check_store_label("plan-cache").is_ok());
        for bad in ["Default", "my.store", "my-store_x"] {
            assert_eq!(check_store_label(bad).unwrap_err(), "expected kebab-case or snake_case", "{bad}");
        }
    }
}
