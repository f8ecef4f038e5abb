//! Many sessions, each holding variables of its own (`python`) or a small
//! DataFrame too (`python-data`, [`Workload`]): opened and set up one after
//! another, then each read back and its answer checked. The loop the
//! fleet's many-sessions part ([`crate::bench::fleet_many`]), the scale section
//! ([`crate::bench::scale`]) and the density section
//! ([`crate::bench::density`]) share; which host serves which session is
//! theirs to say.

use std::time::{Duration, Instant};

use crate::bench::hosts::{Calls, Latencies};

/// What each session runs once opened, as the reports show it (`i`: the
/// session's number).
pub const SET_UP: &str = "x = i; s = f'session-{x}'; l = [x, 2 * x, 3 * x]";
/// What reads a session back.
pub const READ: &str = "print(x, s, l)";
/// Wrong or failed sessions a report names one by one.
const NAMED: usize = 5;

/// What the `python-data` sessions run once opened, besides [`SET_UP`].
pub const DATA_SET_UP: &str = "df = pd.DataFrame({'x': l, 'y': [v / 2 for v in l]})";
/// What reads a `python-data` session back: one value of the DataFrame,
/// read without a pandas reduction (those cost milliseconds here).
pub const DATA_READ: &str = "print(x, s, l, int(df.x.iat[2]), float(df.y.iat[2]))";

/// What each session holds, and in which runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// `python`: [`SET_UP`]'s variables.
    Variables,
    /// `python-data`: the variables and a DataFrame of them ([`DATA_SET_UP`]).
    DataFrame,
}

impl Workload {
    /// The runtime its sessions are opened in.
    pub fn runtime(self) -> &'static str {
        match self {
            Workload::Variables => "python",
            Workload::DataFrame => "python-data",
        }
    }

    /// The set-up cell of session `i`.
    fn set_up_cell(self, i: usize) -> String {
        let variables = format!("x = {i}\ns = f'session-{{x}}'\nl = [x, 2 * x, 3 * x]");
        match self {
            Workload::Variables => variables,
            Workload::DataFrame => format!("import pandas as pd\n{variables}\n{DATA_SET_UP}"),
        }
    }

    /// What reads a session back.
    pub fn read_cell(self) -> &'static str {
        match self {
            Workload::Variables => READ,
            Workload::DataFrame => DATA_READ,
        }
    }

    /// What the read cell prints in session `i`.
    fn expected(self, i: usize) -> String {
        let variables = format!("{i} session-{i} [{i}, {}, {}]", 2 * i, 3 * i);
        match self {
            Workload::Variables => format!("{variables}\n"),
            Workload::DataFrame => format!("{variables} {} {:?}\n", 3 * i, (3 * i) as f64 / 2.0),
        }
    }
}

/// `n` sessions named `<prefix>-<i>`.
pub struct Sessions {
    prefix: &'static str,
    n: usize,
    workload: Workload,
}

/// How the set-up went.
pub struct SetUp {
    /// The whole loop.
    pub total: Duration,
    /// Each session's open and set-up run, request to answer.
    pub per_session: Latencies,
}

/// How the read-back went.
pub struct ReadBack {
    /// The whole loop.
    pub total: Duration,
    /// The right answers' times, request to answer.
    pub right: Vec<Duration>,
    /// Sessions that answered something else (or lost their state), with the answer.
    pub wrong: Vec<String>,
    /// Sessions whose call failed, with the error.
    pub failed: Vec<String>,
}

impl Sessions {
    /// `n` `python` sessions named `<prefix>-0` to `<prefix>-<n - 1>`.
    pub fn new(prefix: &'static str, n: usize) -> Self {
        Self::of(prefix, n, Workload::Variables)
    }

    /// `n` sessions holding `workload`, named `<prefix>-0` to `<prefix>-<n - 1>`.
    pub fn of(prefix: &'static str, n: usize, workload: Workload) -> Self {
        Self { prefix, n, workload }
    }

    /// Session `i`'s id.
    fn name(&self, i: usize) -> String {
        format!("{}-{i}", self.prefix)
    }

    /// Opens each session on the host `host_of` gives for it and runs
    /// [`SET_UP`] there; the first failure ends the loop.
    pub fn set_up<'a>(&self, calls: &Calls, host_of: impl Fn(usize) -> &'a str) -> anyhow::Result<SetUp> {
        let started = Instant::now();
        let mut times = Vec::with_capacity(self.n);
        for i in 0..self.n {
            let (host, session) = (host_of(i), self.name(i));
            let one = Instant::now();
            calls.open_as(host, &session, self.workload.runtime())?;
            calls.run_ok(host, &session, &self.workload.set_up_cell(i))?;
            times.push(one.elapsed());
            self.progress("set up", i + 1, started);
        }
        Ok(SetUp { total: started.elapsed(), per_session: Latencies::of(&times) })
    }

    /// Runs [`READ`] in each session on the host `host_of` gives for it
    /// and checks the answer; every session is read, whatever the others gave.
    pub fn read_back<'a>(&self, calls: &Calls, host_of: impl Fn(usize) -> &'a str) -> ReadBack {
        let started = Instant::now();
        let (mut right, mut wrong, mut failed) = (Vec::with_capacity(self.n), Vec::new(), Vec::new());
        for i in 0..self.n {
            match calls.run(host_of(i), &self.name(i), self.workload.read_cell()) {
                Ok(timed) => {
                    let answer = &timed.answer;
                    if answer["exit_code"] == 0 && answer["state_reset"] != true && answer["stdout"] == self.workload.expected(i) {
                        right.push(timed.elapsed);
                    } else {
                        wrong.push(format!("{}: {answer}", self.name(i)));
                    }
                }
                Err(error) => failed.push(format!("{}: {error:#}", self.name(i))),
            }
            self.progress("read back", i + 1, started);
        }
        ReadBack { total: started.elapsed(), right, wrong, failed }
    }

    /// A progress line at each tenth of a loop of a thousand sessions or more.
    fn progress(&self, what: &str, done: usize, started: Instant) {
        if self.n >= 1000 && done.is_multiple_of(self.n / 10) {
            eprintln!("    {what}: {done} of {} sessions, {:.0} s", self.n, started.elapsed().as_secs_f64());
        }
    }
}

impl ReadBack {
    /// Sessions read back wrong or not at all.
    pub fn bad(&self) -> usize {
        self.wrong.len() + self.failed.len()
    }

    /// `N wrong and M failed of T (must be 0)`.
    pub fn verdict(&self) -> String {
        let all = self.right.len() + self.bad();
        format!("{} wrong and {} failed of {all} (must be 0)", self.wrong.len(), self.failed.len())
    }

    /// The first few wrong or failed sessions, a line each.
    pub fn named(&self) -> impl Iterator<Item = String> + '_ {
        self.wrong.iter().chain(&self.failed).take(NAMED).map(|bad| format!("  {bad}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_session_expects_its_own_values() {
        assert_eq!(Workload::Variables.expected(7), "7 session-7 [7, 14, 21]\n");
        assert_eq!(Workload::Variables.set_up_cell(7), "x = 7\ns = f'session-{x}'\nl = [x, 2 * x, 3 * x]");
        assert_eq!(Workload::DataFrame.expected(7), "7 session-7 [7, 14, 21] 21 10.5\n");
        assert_eq!(Workload::DataFrame.expected(2), "2 session-2 [2, 4, 6] 6 3.0\n");
        assert!(Workload::DataFrame.set_up_cell(7).ends_with(DATA_SET_UP));
        assert_eq!(Sessions::new("scale", 3).name(2), "scale-2");
    }
}
