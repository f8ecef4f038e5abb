//! A section's table: rows of latencies, each with its goal, printed
//! under one heading, the notes under it, and the warnings and errors the
//! section's hosts logged. The fleet, scale and density sections print
//! theirs this way.

use std::time::Duration;

use crate::bench::hosts::{Host, Latencies, LogLine};

/// One printed row.
pub struct Row {
    name: String,
    latencies: Latencies,
    goal: &'static str,
}

impl Row {
    /// A row named `name` of `durations`, with its goal as printed.
    pub fn new(name: &str, durations: &[Duration], goal: &'static str) -> Self {
        Self::of(name, Latencies::of(durations), goal)
    }

    /// A row named `name` of `latencies`, with its goal as printed.
    pub fn of(name: &str, latencies: Latencies, goal: &'static str) -> Self {
        Self { name: name.to_owned(), latencies, goal }
    }

    pub fn p50(&self) -> f64 {
        self.latencies.p50()
    }
}

/// What a part of the section hands back for printing.
#[derive(Default)]
pub struct Part {
    /// Its rows of the table, in order.
    pub rows: Vec<Row>,
    /// Lines printed under the table: ratios, where the time goes, counts.
    pub notes: Vec<String>,
    /// The warnings and errors the part's own hosts logged ([`warnings`]).
    pub logged: Vec<String>,
}

/// Prints `rows` under a heading: each row's name, n, p50, p99 and goal.
pub fn print_table<'a>(rows: impl IntoIterator<Item = &'a Row>) {
    println!("{:<56} {:>5} {:>10} {:>10}  goal", "row", "n", "p50", "p99");
    for row in rows {
        let line = format!("{:<56} {:>5} {:>8.1}ms {:>8.1}ms  {}", row.name, row.latencies.n(), row.p50(), row.latencies.p99(), row.goal);
        println!("{}", line.trim_end());
    }
}

/// The warnings and errors `host` logged, one line per message with its
/// count and its first instance's error and session.
pub fn warnings(host: &Host) -> Vec<String> {
    let mut counted: Vec<(String, usize, LogLine)> = Vec::new();
    for line in host.log().into_iter().filter(|l| l.line["level"] != "INFO") {
        match counted.iter_mut().find(|(message, _, _)| *message == line.message) {
            Some(seen) => seen.1 += 1,
            None => counted.push((line.message.clone(), 1, line)),
        }
    }
    counted
        .into_iter()
        .map(|(message, n, first)| {
            let error = first.line["error"].as_str().unwrap_or_default();
            format!("host {} logged {n}x \"{message}\" (the first: {error}, session {})", host.name, first.session.as_deref().unwrap_or("-"))
        })
        .collect()
}
