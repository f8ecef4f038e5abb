//! Checks the book's pages (`docs/src/**/*.md`) and `README.md`:
//!
//! - every relative link resolves: to a file that exists (from a book page,
//!   one inside `docs/src/`, all the built book holds), and an `#anchor` to
//!   a heading id of the target page, made as mdbook and GitHub make them;
//! - every page of the book is listed in `SUMMARY.md`, and every
//!   `{{#include PATH}}` names a file that exists;
//! - every fenced code block of the book names its language, and a shell or
//!   Python block is exactly one `{{#include ../examples/...}}`: those files
//!   run in the test suite (`tests/docs_examples.rs`); anything else is an
//!   output sample or a snippet, marked `text`, `toml`, `json`, ...

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use anyhow::Context;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Languages whose blocks a reader would run: these must be included examples.
const RUNNABLE: &[&str] = &["sh", "bash", "shell", "console", "zsh", "python", "python3", "py"];

/// Every problem found, as `path:line: what`; empty when all is well.
pub fn check(root: &Path) -> anyhow::Result<Vec<String>> {
    let book = root.join("docs/src");
    let mut pages = Vec::new();
    markdown_files(&book, &mut pages)?;
    pages.sort();
    let mut checker = Checker { root: root.to_owned(), book: book.clone(), anchors: HashMap::new(), problems: Vec::new() };
    checker.summary_lists_every_page(&pages)?;
    for page in std::iter::once(root.join("README.md")).chain(pages) {
        checker.page(&page)?;
    }
    Ok(checker.problems)
}

struct Checker {
    root: PathBuf,
    book: PathBuf,
    /// Heading ids per page, read when first linked to.
    anchors: HashMap<PathBuf, HashSet<String>>,
    problems: Vec<String>,
}

impl Checker {
    fn page(&mut self, page: &Path) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(page).with_context(|| format!("reading {}", page.display()))?;
        let in_book = page.starts_with(&self.book);
        let mut code: Option<(String, usize, String)> = None;
        for (event, range) in Parser::new_ext(&text, options()).into_offset_iter() {
            match event {
                Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                    if let Err(problem) = self.link(page, in_book, &dest_url) {
                        self.report(page, &text, range.start, &problem);
                    }
                }
                Event::Start(Tag::CodeBlock(kind)) if in_book => {
                    let language = match kind {
                        CodeBlockKind::Fenced(info) => info.split([' ', ',', '{']).next().unwrap_or("").to_owned(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    code = Some((language, range.start, String::new()));
                }
                Event::Text(content) => {
                    if let Some((_, _, body)) = code.as_mut() {
                        body.push_str(&content);
                    }
                }
                Event::End(TagEnd::CodeBlock) => {
                    if let Some((language, start, body)) = code.take()
                        && let Err(problem) = code_block(&language, &body)
                    {
                        self.report(page, &text, start, &problem);
                    }
                }
                _ => {}
            }
        }
        if in_book {
            for (offset, target) in includes(&text) {
                let file = target.split(':').next().unwrap_or_default();
                if !page.parent().unwrap_or(page).join(file).is_file() {
                    self.report(page, &text, offset, &format!("{{{{#include {target}}}}}: no file {file}"));
                }
            }
        }
        Ok(())
    }

    /// Checks one link target; `Err` says why it does not resolve.
    fn link(&mut self, page: &Path, in_book: bool, dest: &str) -> Result<(), String> {
        if dest.contains("://") || dest.starts_with("mailto:") || dest.starts_with("//") {
            return Ok(());
        }
        if dest.starts_with('/') {
            return Err(format!("link {dest}: use a relative path"));
        }
        let (path, anchor) = dest.split_once('#').unwrap_or((dest, ""));
        let target = if path.is_empty() { page.to_owned() } else { normalise(&page.parent().unwrap_or(page).join(path)) };
        if in_book && !target.starts_with(&self.book) {
            return Err(format!("link {dest}: outside docs/src, so not in the built book (name the path in `code` instead)"));
        }
        if !(target.is_file() || (!in_book && target.is_dir())) {
            return Err(format!("link {dest}: no such file"));
        }
        if anchor.is_empty() {
            return Ok(());
        }
        if target.extension().is_none_or(|e| e != "md") {
            return Err(format!("link {dest}: an anchor into a file that is not Markdown"));
        }
        let ids = match self.anchors.get(&target) {
            Some(ids) => ids,
            None => {
                let text = std::fs::read_to_string(&target).map_err(|e| format!("link {dest}: {e}"))?;
                self.anchors.entry(target.clone()).or_insert_with(|| heading_ids(&text))
            }
        };
        if !ids.contains(anchor) {
            let shown = target.strip_prefix(&self.root).unwrap_or(&target).display().to_string();
            return Err(format!("link {dest}: {shown} has no heading #{anchor}"));
        }
        Ok(())
    }

    /// Every page under `docs/src/` but `SUMMARY.md` is linked from it: mdbook leaves out any other.
    fn summary_lists_every_page(&mut self, pages: &[PathBuf]) -> anyhow::Result<()> {
        let summary = self.book.join("SUMMARY.md");
        let text = std::fs::read_to_string(&summary).context("reading docs/src/SUMMARY.md")?;
        let listed: HashSet<PathBuf> = Parser::new_ext(&text, options())
            .filter_map(|event| match event {
                Event::Start(Tag::Link { dest_url, .. }) => Some(normalise(&self.book.join(dest_url.split('#').next().unwrap_or("")))),
                _ => None,
            })
            .collect();
        for page in pages.iter().filter(|p| **p != summary && !listed.contains(*p)) {
            self.report(page, "", 0, "not listed in SUMMARY.md, so the book leaves it out");
        }
        Ok(())
    }

    fn report(&mut self, page: &Path, text: &str, offset: usize, problem: &str) {
        let line = text[..offset.min(text.len())].matches('\n').count() + 1;
        let shown = page.strip_prefix(&self.root).unwrap_or(page).display();
        self.problems.push(format!("{shown}:{line}: {problem}"));
    }
}

/// The Markdown extensions mdbook turns on.
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// A code block of the book: its language named, and runnable code only as an included example.
fn code_block(language: &str, body: &str) -> Result<(), String> {
    if language.is_empty() {
        return Err("a code block without a language: include an example, or mark it text, toml, json, ...".into());
    }
    if !RUNNABLE.contains(&language) {
        return Ok(());
    }
    let body = body.trim();
    let included = body.strip_prefix("{{#include ../examples/").is_some_and(|rest| rest.ends_with("}}") && !rest.contains('\n'));
    if included {
        Ok(())
    } else {
        Err(format!(
            "a `{language}` block that is not one {{{{#include ../examples/...}}}}: put runnable code in docs/examples/ (the test suite runs it), or mark the block text"
        ))
    }
}

/// The heading ids of a page: an explicit `{#id}`, else the heading's text
/// lower-cased, letters, digits, `_` and `-` kept, whitespace as `-`; a
/// repeated id gets `-1`, `-2`, ... (as mdbook does, and GitHub alike).
fn heading_ids(text: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut heading: Option<(Option<String>, String)> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => heading = Some((id.map(|i| i.to_string()), String::new())),
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, content)) = heading.as_mut() {
                    content.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((explicit, content)) = heading.take() {
                    let id = explicit.unwrap_or_else(|| id_from_content(&content));
                    let mut unique = id.clone();
                    let mut n = 0;
                    while !ids.insert(unique.clone()) {
                        n += 1;
                        unique = format!("{id}-{n}");
                    }
                }
            }
            _ => {}
        }
    }
    ids
}

fn id_from_content(content: &str) -> String {
    content
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// `(offset, PATH)` of each `{{#include PATH}}` in a page.
fn includes(text: &str) -> Vec<(usize, String)> {
    const OPEN: &str = "{{#include ";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(OPEN).map(|i| from + i) {
        let start = at + OPEN.len();
        let Some(len) = text[start..].find("}}") else { break };
        found.push((at, text[start..start + len].trim().to_owned()));
        from = start + len;
    }
    found
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn markdown_files(dir: &Path, into: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            markdown_files(&path, into)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_made_as_mdbook_and_github_make_them() {
        let ids = heading_ids("# The agent endpoint: `POST /run`\n## Data runtime: pandas, numpy\n## Data runtime: pandas, numpy\n## Own {#mine}\n");
        for id in ["the-agent-endpoint-post-run", "data-runtime-pandas-numpy", "data-runtime-pandas-numpy-1", "mine"] {
            assert!(ids.contains(id), "{id} in {ids:?}");
        }
    }

    #[test]
    fn runnable_blocks_must_be_included_examples() {
        assert!(code_block("sh", "{{#include ../examples/rest-crud.sh}}\n").is_ok());
        assert!(code_block("sh", "curl localhost:3000/members/\n").is_err());
        assert!(code_block("text", "curl localhost:3000/members/\n").is_ok());
        assert!(code_block("", "anything").is_err());
    }

    #[test]
    fn includes_are_found() {
        assert_eq!(includes("a\n{{#include ../examples/x.sh:2:}}\n"), vec![(2, "../examples/x.sh:2:".to_owned())]);
    }
}
