//! `check` never panics, and never overflows the stack, whatever the input:
//! truncated and garbled corpus snippets, random bytes, pathological nesting.

#[allow(dead_code, reason = "each test binary uses part of it")]
mod support;

use anypath_block_gate::{Verdict, check};

/// A small deterministic generator (xorshift64*), so that a failure can be
/// replayed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }
}

/// Runs `check` on a thread with a small stack, as a host's worker thread
/// may be: the check must make room for itself.
fn check_on_small_stack(sources: Vec<String>) {
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            for source in &sources {
                let _ = check(source);
            }
        })
        .expect("a thread")
        .join()
        .expect("check never panics");
}

#[test]
fn truncated_corpus_snippets() {
    let mut sources = Vec::new();
    for (_, source) in support::corpus() {
        let boundaries: Vec<usize> = (0..=source.len())
            .filter(|&i| source.is_char_boundary(i))
            .collect();
        // Every cut of a short snippet; some forty spread over a long one.
        let step = (boundaries.len() / 40).max(1);
        for &cut in boundaries.iter().step_by(step) {
            sources.push(source[..cut].to_owned());
            sources.push(source[cut..].to_owned());
        }
    }
    check_on_small_stack(sources);
}

#[test]
fn garbled_corpus_snippets() {
    // Pieces that change the structure: brackets, quotes, prefixes, keywords,
    // indentation, line breaks of every kind.
    const PIECES: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "'",
        "\"",
        "'''",
        "f'",
        "t'",
        "rb'",
        "\\",
        "\n",
        "\r",
        "\r\n",
        "\t",
        "\x0c",
        " ",
        "    ",
        ":",
        ",",
        ";",
        ".",
        "=",
        ":=",
        "*",
        "**",
        "@",
        "#",
        "lambda",
        "async ",
        "await ",
        "yield",
        "def ",
        "class ",
        "if ",
        "else",
        "elif ",
        "try:",
        "except",
        "finally:",
        "match ",
        "case ",
        "type ",
        "import ",
        "from ",
        "__",
        "é",
        "\u{feff}",
        "\0",
        "{x!r:{y}}",
        "0x",
        "1_",
        "...",
        "->",
    ];
    let corpus = support::corpus();
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let mut sources = Vec::new();
    for _ in 0..20_000 {
        let (_, source) = &corpus[random.below(corpus.len())];
        let mut text = source.clone();
        for _ in 0..=random.below(4) {
            let at = random.below(text.len() + 1);
            let at = (0..=at)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            if random.below(3) == 0 && at < text.len() {
                // Cut a piece out.
                let end = (at + 1 + random.below(8)).min(text.len());
                let end = (end..=text.len())
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(text.len());
                text.replace_range(at..end, "");
            } else {
                text.insert_str(at, PIECES[random.below(PIECES.len())]);
            }
        }
        sources.push(text);
    }
    check_on_small_stack(sources);
}

#[test]
fn random_bytes() {
    let mut random = Random(0x0123_4567_89ab_cdef);
    let mut sources = Vec::new();
    for _ in 0..5_000 {
        let len = random.below(200);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                // Mostly printable ASCII, so that some of it tokenizes.
                let byte = random.next() as u8;
                if random.below(4) == 0 {
                    byte
                } else {
                    b' ' + byte % 95
                }
            })
            .collect();
        sources.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    check_on_small_stack(sources);
}

#[test]
fn pathological_nesting_is_left_to_the_guest() {
    let deep = 200_000;
    let sources = vec![
        format!("x = {}1", "-".repeat(deep)),
        format!("x = {}1", "not ".repeat(deep / 4)),
        format!("x = {}1{}", "(".repeat(deep), ")".repeat(deep)),
        format!("x = {}1{}", "[".repeat(deep), "]".repeat(deep)),
        format!("x = {}", "(".repeat(deep)),
        format!("x = a{}", ".b".repeat(deep / 2)),
        format!("x = f{}", "()".repeat(deep / 2)),
        format!("x = {}", vec!["a"; deep / 4].join(" + ")),
        format!("x = {}1", "a ** ".repeat(deep / 5)),
        format!("x = {}1", "lambda: ".repeat(deep / 8)),
        format!("x = {}1", "1 if 1 else ".repeat(deep / 12)),
        format!("x = {}0{}", "{0: ".repeat(deep / 4), "}".repeat(deep / 4)),
        format!("x = {}", "f'{".repeat(deep / 3)),
        (0..2_000)
            .map(|i| format!("{}if 1:\n", " ".repeat(i)))
            .collect::<String>()
            + &" ".repeat(2_000)
            + "pass\n",
        format!(
            "if a:\n    pass\n{}",
            "elif a:\n    pass\n".repeat(deep / 20)
        ),
        format!(
            "match x:\n case {}y{}: pass\n",
            "(".repeat(deep / 2),
            ")".repeat(deep / 2)
        ),
    ];
    for source in &sources {
        let source = source.clone();
        let verdict = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || check(&source))
            .expect("a thread")
            .join()
            .expect("check never panics");
        assert_eq!(verdict, Verdict::Unparsed);
    }
}
