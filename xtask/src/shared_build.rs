//! The check that `cargo xtask up` after `cargo xtask test` compiles nothing:
//! the test build (`TEST_BUILD`) must leave up's (`APP_BUILD`) fresh. Run by
//! `cargo xtask test` right after its build; seconds when it holds.

use std::process::Stdio;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::build::APP_BUILD;
use crate::shell::{cargo_command, root, step};

/// Runs up's cargo build and fails, naming them, if it compiled any crate.
pub fn check() -> anyhow::Result<()> {
    step("checking that cargo xtask up's build finds everything built");
    let output = cargo_command()
        .args(APP_BUILD)
        .arg("--message-format=json")
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .context("starting cargo for up's build")?;
    if !output.status.success() {
        bail!("cargo {} failed with {}", APP_BUILD.join(" "), output.status);
    }
    let rebuilt = rebuilt(&String::from_utf8_lossy(&output.stdout));
    if !rebuilt.is_empty() {
        bail!(
            "cargo {} compiled {} after the test build: cargo xtask up would too. A dependency's features \
             likely differ without the tests' dev-dependencies (compare `cargo tree --workspace -e normal,build -f '{{p}} {{f}}'` \
             with `-e normal,build,dev`); see the [dev-dependencies] notes in Cargo.toml",
            APP_BUILD.join(" "),
            rebuilt.join(", ")
        );
    }
    Ok(())
}

/// The packages (`name@version`) of the units cargo's JSON messages say it
/// compiled rather than found fresh.
fn rebuilt(messages: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let compiled = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact" && message["fresh"] == false);
    for message in compiled {
        let name = package(&message);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// `name@version` from a message's package id (`registry+...#name@1.0.0`,
/// or `path+file://.../name#1.0.0` when the directory is the name).
fn package(message: &Value) -> String {
    let id = message["package_id"].as_str().unwrap_or_default();
    let target = message["target"]["name"].as_str().unwrap_or("?");
    match id.rsplit_once('#') {
        Some((_, spec)) if spec.contains('@') => spec.to_owned(),
        Some((_, version)) => format!("{target}@{version}"),
        None => target.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_units_compiled_again_are_named() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#tungstenite@0.29.0","target":{"name":"tungstenite"},"fresh":false}"#,
            r#"{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#serde@1.0.0","target":{"name":"serde"},"fresh":true}"#,
            r#"{"reason":"build-script-executed","package_id":"registry+https://github.com/rust-lang/crates.io-index#ring@0.17.0"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///src/anypath/xtask#0.1.0","target":{"name":"xtask"},"fresh":false}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///src/anypath/crates/service#anypath-service@0.1.0","target":{"name":"anypath_service"},"fresh":false}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ];
        assert_eq!(rebuilt(&messages.join("\n")), ["tungstenite@0.29.0", "xtask@0.1.0", "anypath-service@0.1.0"]);
        assert!(rebuilt("").is_empty());
    }
}
