//! Durations of the phases of one request, for the `Server-Timing` header.

use std::time::Instant;

/// Accumulated wall time per phase; a phase run twice (a conflict re-run) adds up.
#[derive(Default)]
pub struct Timings {
    phases: Vec<(&'static str, f64)>,
}

impl Timings {
    /// Runs `f`, adding its duration to `phase`.
    pub fn time<T>(&mut self, phase: &'static str, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let value = f();
        self.add(phase, started.elapsed().as_secs_f64() * 1e3);
        value
    }

    /// Adds `ms` measured elsewhere (the sandbox's own run time) to `phase`.
    pub fn add(&mut self, phase: &'static str, ms: f64) {
        match self.phases.iter_mut().find(|(name, _)| *name == phase) {
            Some((_, total)) => *total += ms,
            None => self.phases.push((phase, ms)),
        }
    }

    /// `plan;dur=0.41, load;dur=0.83, ...` (milliseconds, as the header defines).
    pub fn header(&self) -> String {
        self.phases.iter().map(|(name, ms)| format!("{name};dur={ms:.2}")).collect::<Vec<_>>().join(", ")
    }
}
