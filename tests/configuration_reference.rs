//! The configuration reference cannot drift: `spin.toml` declares exactly
//! the variables the code defines (`anypath_rest::settings::VARIABLES`),
//! with the same defaults and secrecy, and the book's page is what
//! `anypath config-reference` renders from those definitions and the flags.

use crate::common;

use std::process::Command;

use anypath_rest::settings::VARIABLES;
use common::app::repo;

#[test]
fn spin_toml_declares_exactly_the_variables_the_code_defines() {
    let text = std::fs::read_to_string(repo().join("spin.toml")).expect("spin.toml");
    let manifest: toml::Table = toml::from_str(&text).expect("spin.toml parses");
    let declared = manifest["variables"].as_table().expect("a [variables] table");
    let names: Vec<&str> = declared.keys().map(String::as_str).collect();
    let mut defined: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    defined.sort_unstable();
    assert_eq!(sorted, defined, "spin.toml's [variables] and settings::VARIABLES name different variables");
    for variable in VARIABLES {
        let entry = declared[variable.name].as_table().expect("an inline table");
        let default = entry.get("default").and_then(toml::Value::as_str).unwrap_or("");
        let secret = entry.get("secret").and_then(toml::Value::as_bool).unwrap_or(false);
        assert_eq!((default, secret), (variable.default, variable.secret), "{}: default and secrecy", variable.name);
    }
}

#[test]
fn the_books_configuration_page_is_generated_from_the_code() {
    let output = Command::new(env!("CARGO_BIN_EXE_anypath")).arg("config-reference").output().expect("anypath runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let rendered = String::from_utf8(output.stdout).expect("UTF-8");
    let page = std::fs::read_to_string(repo().join("docs/src/configuration.md")).expect("the page");
    assert!(page == rendered, "docs/src/configuration.md is out of date: run `cargo xtask docs`");
    for variable in VARIABLES {
        assert!(page.contains(&format!("| `{}` |", variable.name)), "{} is missing", variable.name);
    }
    for flag in ["--session-memory-mb", "--hibernate-after-idle-seconds", "--api-keys", "--sandbox-listen", "--token"] {
        assert!(page.contains(&format!("`{flag} <")), "{flag} is missing");
    }
}
