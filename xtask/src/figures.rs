//! The current figures stand in two places, the README's "How fast" table
//! and the Performance page's: this tidy check holds the two tables to the
//! same rows, cell by cell, so a new bench run cannot be copied into one and
//! forgotten in the other.

use std::path::Path;

/// The pages that carry the table: the first is the reference the others are compared with.
pub const PAGES: [&str; 2] = ["README.md", "docs/src/performance.md"];

/// The line before the table, on a line of its own.
pub const BEGIN: &str = "<!-- figures: begin -->";

/// The line after the table, on a line of its own.
pub const END: &str = "<!-- figures: end -->";

/// How to mend a difference, in one line.
pub const HINT: &str = "copy the whole table from one bench run into both pages, between the figures markers";

/// Where the tables differ, and how.
#[derive(Debug, PartialEq, Eq)]
pub struct Difference {
    /// The page, relative to the repository root.
    pub path: String,
    /// 1-based; 0 when the problem has no line of its own.
    pub line: usize,
    pub problem: String,
}

/// One row of the table: its 1-based line in the page and its cells, trimmed.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    line: usize,
    cells: Vec<String>,
}

/// Reads both pages under `root` and reports where their tables differ.
pub fn check(root: &Path) -> Vec<Difference> {
    let mut texts = Vec::new();
    let mut violations = Vec::new();
    for page in PAGES {
        match std::fs::read_to_string(root.join(page)) {
            Ok(text) => texts.push((page, text)),
            Err(e) => violations.push(Difference { path: page.to_owned(), line: 0, problem: format!("cannot be read for its figures table: {e}") }),
        }
    }
    if violations.is_empty() {
        violations.extend(compare(texts.iter().map(|(page, text)| (*page, text.as_str()))));
    }
    violations
}

/// Compares the table of every page given with the first page's, row by
/// row; a page without one table between the markers is reported too.
fn compare<'a>(pages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Difference> {
    let mut violations = Vec::new();
    let mut reference: Option<(&str, Vec<Row>)> = None;
    for (page, text) in pages {
        let rows = match table(text) {
            Ok(rows) => rows,
            Err((line, problem)) => {
                violations.push(Difference { path: page.to_owned(), line, problem });
                continue;
            }
        };
        let Some((first, expected)) = &reference else {
            reference = Some((page, rows));
            continue;
        };
        for index in 0..expected.len().max(rows.len()) {
            let problem = match (expected.get(index), rows.get(index)) {
                (Some(want), Some(got)) if want.cells == got.cells => continue,
                (Some(want), Some(got)) => {
                    Difference { path: page.to_owned(), line: got.line, problem: format!("figures row {} differs from {first}:{}: `{}` against `{}`", index + 1, want.line, got.cells.join(" | "), want.cells.join(" | ")) }
                }
                (Some(want), None) => Difference { path: page.to_owned(), line: 0, problem: format!("figures row {} of {first}:{} is missing: `{}`", index + 1, want.line, want.cells.join(" | ")) },
                (None, Some(got)) => Difference { path: page.to_owned(), line: got.line, problem: format!("figures row {} is not in {first}'s table: `{}`", index + 1, got.cells.join(" | ")) },
                (None, None) => continue,
            };
            violations.push(problem);
        }
    }
    violations
}

/// The rows of the one table between [`BEGIN`] and [`END`] (the header row
/// included, the `| --- |` line left out); `Err` holds a line and what is wrong.
fn table(text: &str) -> Result<Vec<Row>, (usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let marked = |marker: &str| lines.iter().enumerate().filter(|(_, l)| l.trim() == marker).map(|(i, _)| i).collect::<Vec<_>>();
    let (begins, ends) = (marked(BEGIN), marked(END));
    let (begin, end) = match (begins.as_slice(), ends.as_slice()) {
        ([begin], [end]) if begin < end => (*begin, *end),
        ([], _) | (_, []) => return Err((0, format!("no figures table: mark it with `{BEGIN}` and `{END}`"))),
        ([begin], [_]) => return Err((begin + 1, format!("`{END}` comes before `{BEGIN}`"))),
        _ => return Err((begins.get(1).or(ends.get(1)).map_or(0, |i| i + 1), "more than one figures table".to_owned())),
    };
    let mut rows = Vec::new();
    for (index, line) in lines.iter().enumerate().take(end).skip(begin + 1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('|') {
            return Err((index + 1, "a line between the figures markers that is not a table row".to_owned()));
        }
        let cells = cells(line);
        if cells.iter().all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':'))) {
            continue;
        }
        rows.push(Row { line: index + 1, cells });
    }
    if rows.is_empty() {
        return Err((begin + 1, "the figures table has no rows".to_owned()));
    }
    Ok(rows)
}

/// A table row's cells, trimmed; a `\|` inside a cell does not split it.
fn cells(line: &str) -> Vec<String> {
    let inner = line.strip_prefix('|').unwrap_or(line);
    let inner = inner.strip_suffix('|').filter(|rest| !rest.ends_with('\\')).unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut escaped = false;
    for ch in inner.chars() {
        match ch {
            '|' if !escaped => cells.push(String::new()),
            _ => {
                if let Some(cell) = cells.last_mut() {
                    cell.push(ch);
                }
            }
        }
        escaped = ch == '\\';
    }
    cells.iter().map(|c| c.trim().to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(rows: &str) -> String {
        format!("# Page\n\nSome text.\n\n{BEGIN}\n| path | 2026-11-28 | goal |\n| --- | --- | --- |\n{rows}{END}\n\nMore text.\n")
    }

    const ROWS: &str = "| trivial block | 1197 us | >= 30x |\n| warm cell | 80 us | <= 120 us |\n";

    fn problems(readme: &str, performance: &str) -> Vec<String> {
        compare([("README.md", readme), ("docs/src/performance.md", performance)]).iter().map(|v| format!("{}:{}: {}", v.path, v.line, v.problem)).collect()
    }

    #[test]
    fn equal_tables_agree_whatever_surrounds_them() {
        let other = page(ROWS).replace("Some text.", "Other words, other lines.\n\nAnd more.");
        assert!(problems(&page(ROWS), &other).is_empty(), "{:?}", problems(&page(ROWS), &other));
        // Spacing inside a row is not a difference.
        assert!(problems(&page(ROWS), &page(&ROWS.replace("| 80 us |", "|   80 us   |"))).is_empty());
    }

    #[test]
    fn a_row_that_differs_is_reported_at_its_line() {
        let found = problems(&page(ROWS), &page(&ROWS.replace("80 us", "89 us")));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("docs/src/performance.md:9: figures row 3 differs from README.md:9"), "{found:?}");
        assert!(found[0].contains("89 us") && found[0].contains("80 us"), "{found:?}");
    }

    #[test]
    fn a_missing_or_extra_row_is_reported() {
        let missing = problems(&page(ROWS), &page("| trivial block | 1197 us | >= 30x |\n"));
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].contains("is missing") && missing[0].contains("warm cell"), "{missing:?}");
        let extra = problems(&page(ROWS), &page(&format!("{ROWS}| new row | 1 ms | |\n")));
        assert_eq!(extra.len(), 1, "{extra:?}");
        assert!(extra[0].contains("not in README.md's table"), "{extra:?}");
    }

    #[test]
    fn a_page_without_its_markers_is_reported() {
        let unmarked = page(ROWS).replace(BEGIN, "");
        assert_eq!(problems(&page(ROWS), &unmarked).len(), 1);
        assert_eq!(problems(&unmarked, &page(ROWS)).len(), 1);
        let twice = format!("{}\n{}", page(ROWS), page(ROWS));
        assert!(problems(&page(ROWS), &twice)[0].contains("more than one"));
        let prose = page(ROWS).replace("| --- | --- | --- |", "Not a row.");
        assert!(problems(&page(ROWS), &prose)[0].contains("not a table row"));
    }

    #[test]
    fn cells_split_on_unescaped_pipes() {
        assert_eq!(cells("| a | b \\| c | d |"), ["a", "b \\| c", "d"]);
        assert_eq!(cells("| a |  |"), ["a", ""]);
    }
}
