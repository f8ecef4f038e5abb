//! `cargo xtask tidy`: the source tree's conventions, checked in seconds
//! (`cargo xtask test` runs it before the build): every Rust file opens with
//! a `//!` comment saying its job, none outgrows the line budget unless
//! listed here with a reason, no file names a machine's own directories,
//! no `dbg!` is left behind, and the README's figures table is the
//! Performance page's ([`crate::figures`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::shell::{root, step};

/// The directories whose Rust files the Rust rules apply to.
const RUST_DIRS: &[&str] = &["crates/", "components/", "src/", "xtask/", "tests/"];

/// The source directories whose unit tests no pass builds, each with why: a
/// unit test there would never be built or run.
const UNTESTED_SOURCES: &[(&str, &str)] = &[
    ("src/", "a binary built with `test = false`"),
    ("crates/bench/src/", "a binary built with `test = false`"),
    // Building the components natively for three tests took 90 s of every
    // run; their logic lives in `crates/`, tested there.
    ("components/", "a Spin component, built for wasm32 only"),
];

/// The most lines a Rust file may have before it should be split.
const LINE_BUDGET: usize = 800;

/// The Rust files allowed over [`LINE_BUDGET`], each with why. An entry
/// whose file is back under the budget (or gone) is itself reported, so the
/// list only ever names files that need it.
const LARGE_FILES: &[(&str, &str)] = &[];

/// The top directories that mark a path as one machine's own (a user's home,
/// root's, a build machine's checkout), as `/<name>/`.
const MACHINE_DIRS: &[&str] = &["home", "root", "Users", "work"];

/// E2B's sandbox home: a protocol value (the SDKs' default path), not a
/// machine's, so it and paths under it are allowed wherever they appear.
const E2B_HOME: &str = "/home/user";

/// Lines that name a machine-looking path on purpose: (file, text, why).
const MACHINE_PATH_EXCEPTIONS: &[(&str, &str, &str)] =
    // (Spelled in parts, like every such path in this file, so it does not report itself.)
    &[("crates/service/src/e2b/paths.rs", concat!("\"/home", "/username/x\""), "a lookalike of E2B's home that the path mapping must refuse")];

/// One broken convention.
#[derive(Debug, PartialEq, Eq)]
pub struct Violation {
    /// Relative to the repository root.
    pub path: String,
    /// 1-based.
    pub line: usize,
    pub problem: String,
    /// How to fix it, in one line.
    pub hint: &'static str,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {} (hint: {})", self.path, self.line, self.problem, self.hint)
    }
}

/// What a run found: the violations, and (for information) how many Rust
/// files over the budget each crate has, the listed ones included.
#[derive(Debug, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    pub large_files_per_crate: BTreeMap<String, usize>,
}

/// `cargo xtask tidy`: checks the tree, prints every violation, and fails if
/// there is one.
pub fn run() -> anyhow::Result<()> {
    step("tidy: the source tree's conventions");
    let root = root();
    let files = files(&root)?;
    let mut report = check(files.iter().filter_map(|path| read(&root, path).map(|text| (path.as_str(), text))));
    let figures = crate::figures::check(&root).into_iter();
    report.violations.extend(figures.map(|f| Violation { path: f.path, line: f.line, problem: f.problem, hint: crate::figures::HINT }));
    let counts: Vec<String> = report.large_files_per_crate.iter().map(|(krate, n)| format!("{krate} {n}")).collect();
    if !counts.is_empty() {
        eprintln!("tidy: Rust files over {LINE_BUDGET} lines, per crate: {}", counts.join(", "));
    }
    for violation in &report.violations {
        eprintln!("{violation}");
    }
    if !report.violations.is_empty() {
        bail!("tidy: {} problem(s) in the tree (listed above)", report.violations.len());
    }
    Ok(())
}

/// The tree's files, relative to the root: those committed and those not
/// yet added that `.gitignore` does not exclude.
fn files(root: &Path) -> anyhow::Result<Vec<String>> {
    let output = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .context("running git ls-files (tidy lists the tree's files with git)")?;
    if !output.status.success() {
        bail!("git ls-files failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let mut files: Vec<String> = String::from_utf8_lossy(&output.stdout).split('\0').filter(|p| !p.is_empty()).map(str::to_owned).collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// A file's text; `None` for binary files and files deleted but not yet
/// committed as such.
fn read(root: &Path, path: &str) -> Option<String> {
    String::from_utf8(std::fs::read(root.join(path)).ok()?).ok()
}

/// Checks every (path, text) given, with the tree's own allowlist of large files.
pub fn check<'a>(files: impl IntoIterator<Item = (&'a str, String)>) -> Report {
    check_with(files, LARGE_FILES)
}

/// [`check`] with `large_files` as the files allowed over [`LINE_BUDGET`]
/// (the tests give their own, whatever the tree's list holds today).
fn check_with<'a>(files: impl IntoIterator<Item = (&'a str, String)>, large_files: &[(&str, &str)]) -> Report {
    let mut report = Report::default();
    let mut large = Vec::new();
    for (path, text) in files {
        if is_rust_source(path) {
            opening_comment(path, &text, &mut report.violations);
            no_dbg(path, &text, &mut report.violations);
            no_unit_tests_where_never_run(path, &text, &mut report.violations);
            let lines = text.lines().count();
            if lines > LINE_BUDGET {
                *report.large_files_per_crate.entry(crate_of(path)).or_default() += 1;
                large.push(path.to_owned());
                if !large_files.iter().any(|(listed, _)| *listed == path) {
                    report.violations.push(Violation {
                        path: path.to_owned(),
                        line: lines,
                        problem: format!("{lines} lines, over the budget of {LINE_BUDGET}"),
                        hint: "split it into modules with one job each (or list it in LARGE_FILES in xtask/src/tidy.rs, with why)",
                    });
                }
            }
        }
        machine_paths(path, &text, &mut report.violations);
    }
    for (listed, _) in large_files {
        if !large.iter().any(|path| path == listed) {
            report.violations.push(Violation {
                path: (*listed).to_owned(),
                line: 1,
                problem: format!("listed in LARGE_FILES but not over {LINE_BUDGET} lines (or gone)"),
                hint: "remove its entry from LARGE_FILES in xtask/src/tidy.rs",
            });
        }
    }
    report
}

fn is_rust_source(path: &str) -> bool {
    path.ends_with(".rs") && RUST_DIRS.iter().any(|dir| path.starts_with(dir))
}

/// The crate a file belongs to, for the per-crate counts: `crates/<name>`,
/// `components/<name>`, or the top directory (`src`: the `anypath` binary).
fn crate_of(path: &str) -> String {
    let mut parts = path.split('/');
    match (parts.next(), parts.next()) {
        (Some(top @ ("crates" | "components")), Some(name)) => format!("{top}/{name}"),
        (Some(top), _) => top.to_owned(),
        (None, _) => String::new(),
    }
}

/// The first line is a `//!` comment with words in it.
fn opening_comment(path: &str, text: &str, violations: &mut Vec<Violation>) {
    let first = text.lines().next().unwrap_or_default();
    let said = first.strip_prefix("//!").is_some_and(|rest| !rest.trim().is_empty());
    if !said {
        violations.push(Violation {
            path: path.to_owned(),
            line: 1,
            problem: "does not open with a //! comment".to_owned(),
            hint: "make the first line a //! comment saying the file's job in a sentence or two (a file of `mod` lines too)",
        });
    }
}

fn no_dbg(path: &str, text: &str, violations: &mut Vec<Violation>) {
    // Spelled in two parts so this file does not report itself.
    let needle = concat!("dbg", "!(");
    for (index, line) in text.lines().enumerate() {
        if line.contains(needle) {
            violations.push(Violation {
                path: path.to_owned(),
                line: index + 1,
                problem: format!("{needle}...) left in"),
                hint: "remove it, or log through tracing if the value is worth keeping",
            });
        }
    }
}

fn no_unit_tests_where_never_run(path: &str, text: &str, violations: &mut Vec<Violation>) {
    let Some((_, why)) = UNTESTED_SOURCES.iter().find(|(dir, _)| path.starts_with(dir)) else {
        return;
    };
    // Spelled in parts so this file does not report itself.
    let markers = [concat!("#[", "test]"), concat!("#[", "cfg(test)]"), concat!("#[", "tokio::test")];
    for (index, line) in text.lines().enumerate() {
        if let Some(marker) = markers.iter().find(|marker| line.trim_start().starts_with(**marker)) {
            violations.push(Violation {
                path: path.to_owned(),
                line: index + 1,
                problem: format!("{marker} in {why}: it would never run"),
                hint: "test it from the integration suites (tests/), or move the code into a library crate under crates/ with its tests",
            });
        }
    }
}

fn machine_paths(path: &str, text: &str, violations: &mut Vec<Violation>) {
    for (index, line) in text.lines().enumerate() {
        let excepted = |found: &str| {
            MACHINE_PATH_EXCEPTIONS.iter().any(|(file, text, _)| *file == path && line.contains(text) && text.contains(found))
        };
        if let Some(found) = machine_path(line).filter(|found| !excepted(found)) {
            violations.push(Violation {
                path: path.to_owned(),
                line: index + 1,
                problem: format!("names a machine's own directory ({found}...)"),
                hint: "use a path relative to the repository, or a placeholder such as <dir> or ~",
            });
        }
    }
}

/// The first `/<machine dir>/` in the line that is not E2B's home (nor a
/// path under it): a home directory, root's, a checkout's top directory.
fn machine_path(line: &str) -> Option<String> {
    for dir in MACHINE_DIRS {
        let needle = format!("/{dir}/");
        for (at, _) in line.match_indices(&needle) {
            let rest = &line[at..];
            let e2b = rest.strip_prefix(E2B_HOME).is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '-'));
            // A longer path ending in one (`/srv/home/`) is not a top directory.
            let top = line[..at].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'));
            if !e2b && top {
                return Some(needle);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(path: &str, text: &str) -> Vec<String> {
        check([(path, text.to_owned())]).violations.iter().filter(|v| !v.problem.contains("LARGE_FILES")).map(|v| v.to_string()).collect()
    }

    #[test]
    fn a_rust_file_opens_with_its_job() {
        assert!(checked("crates/a/src/lib.rs", "//! Does one thing.\nfn f() {}\n").is_empty());
        assert!(checked("crates/a/src/lib.rs", "mod a;\nmod b;\n")[0].starts_with("crates/a/src/lib.rs:1: does not open"));
        assert_eq!(checked("src/main.rs", "//!\nfn main() {}\n").len(), 1, "an empty //! says nothing");
        assert_eq!(checked("tests/a.rs", "// A plain comment.\n").len(), 1);
        assert!(checked("docs/a.rs", "fn outside_the_rust_dirs() {}\n").is_empty());
    }

    #[test]
    fn dbg_is_reported_where_it_is() {
        let text = format!("//! Job.\nfn f() {{\n    {}1);\n}}\n", concat!("dbg", "!("));
        let found = checked("xtask/src/a.rs", &text);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("xtask/src/a.rs:3: "), "{found:?}");
    }

    #[test]
    fn unit_tests_in_a_binary_without_a_test_harness_are_reported() {
        let text = format!("//! Job.\n{}\nmod tests {{}}\n", concat!("#[", "cfg(test)]"));
        let found = checked("crates/bench/src/a.rs", &text);
        assert!(found.len() == 1 && found[0].starts_with("crates/bench/src/a.rs:2: ") && found[0].contains("never run"), "{found:?}");
        assert_eq!(checked("src/cli.rs", &format!("//! Job.\n    {}\nfn t() {{}}\n", concat!("#[", "test]"))).len(), 1);
        let component = checked("components/store/src/a.rs", &text);
        assert!(component.len() == 1 && component[0].contains("a Spin component"), "a component's are never built natively: {component:?}");
        assert!(checked("crates/sandbox/src/a.rs", &text).is_empty(), "a library's unit tests run");
    }

    #[test]
    fn files_over_the_budget_are_reported_unless_listed() {
        let long = format!("//! Job.\n{}", "fn f() {}\n".repeat(LINE_BUDGET));
        let found = checked("crates/a/src/big.rs", &long);
        assert!(found.len() == 1 && found[0].contains("over the budget"), "{found:?}");
        let listed = "crates/b/src/listed.rs";
        let report = check_with([(listed, long.clone()), ("crates/a/src/big.rs", long)], &[(listed, "why")]);
        assert!(report.violations.iter().all(|v| v.path != listed || v.problem.contains("LARGE_FILES")), "{:?}", report.violations);
        assert_eq!(report.large_files_per_crate.get("crates/a"), Some(&1));
    }

    #[test]
    fn a_listed_file_back_under_the_budget_is_reported() {
        let listed = "crates/a/src/listed.rs";
        let report = check_with([(listed, "//! Job.\n".to_owned())], &[(listed, "why")]);
        assert!(report.violations.iter().any(|v| v.path == listed && v.hint.contains("remove its entry")));
    }

    #[test]
    fn machine_paths_are_found_but_not_e2b_home() {
        let home = format!("/{}/", "home");
        let work = format!("/{}/", "work");
        assert_eq!(machine_path(&format!("see {home}me/project")), Some(home.clone()));
        assert_eq!(machine_path(&format!("cd {work}main && cargo test")), Some(work));
        assert_eq!(machine_path(&format!("{}/x.txt", format!("/{}/", "root").trim_end_matches('/'))), Some(format!("/{}/", "root")));
        for e2b in ["/home/user", "\"/home/user/a.txt\"", "`/home/user`", "(/home/user/..)", "'/home/user'"] {
            assert_eq!(machine_path(e2b), None, "{e2b}");
        }
        assert_eq!(machine_path(&format!("{home}users/x")), Some(home.clone()), "only E2B's own home is allowed");
        assert_eq!(machine_path("/srv/home/x and target/work/y"), None, "not a top directory");
        let excepted = concat!("        for path in [\"/etc/passwd\", \"/home", "/username/x\"] {");
        assert!(checked("crates/service/src/e2b/paths.rs", &format!("//! Job.\n{excepted}\n")).is_empty());
        assert_eq!(checked("crates/service/src/other.rs", &format!("//! Job.\n{excepted}\n")).len(), 1);
    }
}
