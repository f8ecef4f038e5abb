//! The corpus, read as `expected.py` reads it.

use std::path::Path;

/// (name, source) for every snippet of every `tests/corpus/*.txt`, in the
/// order `expected.py` reads them: a line `=== NAME` starts a snippet that
/// runs to the next such line, without its last line break; `=== NAME json`
/// takes the next line as a JSON string.
pub fn corpus() -> Vec<(String, String)> {
    corpus_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus"))
}

/// [`corpus`], read from `directory` (the sandbox's tests read it too).
pub fn corpus_in(directory: &Path) -> Vec<(String, String)> {
    let mut paths: Vec<_> = std::fs::read_dir(directory)
        .expect("tests/corpus is readable")
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    paths.sort();
    let mut snippets = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("a corpus file is UTF-8");
        let mut lines: Vec<&str> = text.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        lines.push("=== ");
        let mut header: Option<&str> = None;
        let mut body: Vec<&str> = Vec::new();
        for line in lines {
            if let Some(next) = line.strip_prefix("=== ") {
                if let Some(header) = header {
                    let (name, flag) = header.split_once(' ').unwrap_or((header, ""));
                    let source = if flag == "json" {
                        assert_eq!(body.len(), 1, "{name}: a json snippet is one line");
                        serde_json::from_str(body[0]).expect("a json snippet is a JSON string")
                    } else {
                        body.join("\n")
                    };
                    snippets.push((name.to_owned(), source));
                }
                header = Some(next);
                body.clear();
            } else if header.is_some() {
                body.push(line);
            }
        }
    }
    snippets
}

/// `expected.py`'s fingerprint of a snippet: FNV-1a, 64 bits, of its UTF-8.
pub fn fnv1a64(text: &str) -> String {
    let digest = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |digest, byte| {
            (digest ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{digest:016x}")
}
