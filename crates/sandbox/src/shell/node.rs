//! `node` in the shell: a fresh instance of the `javascript` runtime on the
//! same tree (never a host process), running the program the arguments
//! name as Node runs a CommonJS script: `node -e CODE`, `node -p EXPR`,
//! `node FILE ARGS...`, or the program read from stdin.

use super::program::{ProgramExit, ProgramHost, STOPPED};
use crate::live::CellRequest;

/// Exit status of bad arguments (Node's own for an unknown option is 9).
const USAGE: i32 = 9;
/// What `node --version` says: the engine is QuickJS, not Node's V8.
const VERSION: &str = "v0.0.0-quickjs (anypath: QuickJS-ng in WebAssembly, not Node.js)";

/// What a fresh JavaScript instance for a command starts from (no wheelhouse).
pub type NodeHost = ProgramHost;

/// The program an argument list names, as Node reads its command line.
#[derive(Debug, PartialEq, Eq)]
enum Program {
    /// `-e CODE` (`--eval`).
    Eval(String),
    /// `-p EXPR` (`--print`): the value printed.
    Print(String),
    /// A script's path.
    Script(String),
    /// `-` or nothing: the program is stdin.
    Stdin,
    /// `-v`, `--version`.
    Version,
}

/// Reads `args` (without `node`) into the program and `process.argv`'s tail.
fn parse(args: &[String]) -> Result<(Program, Vec<String>), String> {
    let rest = |from: usize| args.get(from..).unwrap_or_default().to_vec();
    let value = |at: usize, option: &str| args.get(at).cloned().ok_or_else(|| format!("node: {option} requires an argument"));
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        match arg.as_str() {
            "-e" | "--eval" => return Ok((Program::Eval(value(at + 1, arg)?), rest(at + 2))),
            "-p" | "--print" => return Ok((Program::Print(value(at + 1, arg)?), rest(at + 2))),
            "-v" | "--version" => return Ok((Program::Version, Vec::new())),
            "-" => return Ok((Program::Stdin, rest(at + 1))),
            // Options that change nothing here.
            "--no-warnings" | "--enable-source-maps" | "--no-deprecation" => {}
            flag if flag.starts_with('-') => return Err(format!("node: bad option: {flag}")),
            script => return Ok((Program::Script(script.to_owned()), rest(at + 1))),
        }
        at += 1;
    }
    Ok((Program::Stdin, Vec::new()))
}

/// JavaScript's literal for `text`.
fn literal(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "''".to_owned())
}

/// The cell that runs `program` as `node` would: `process.argv` and the
/// working directory set first, the source run as a CommonJS module body
/// (its declarations its own), an uncaught error's stack on stderr and
/// exit status 1.
fn cell(program: &Program, argv: &[String], cwd: &str, stdin: &[u8]) -> String {
    let stdin = String::from_utf8_lossy(stdin);
    let (filename, source, print) = match program {
        Program::Eval(code) => ("[eval]".to_owned(), literal(code), false),
        Program::Print(code) => ("[eval]".to_owned(), literal(code), true),
        Program::Script(path) => (path.clone(), format!("require('fs').readFileSync({}, 'utf8')", literal(path)), false),
        Program::Stdin | Program::Version => ("[stdin]".to_owned(), literal(&stdin), false),
    };
    let script_argv: Vec<&str> = match program {
        Program::Script(path) => std::iter::once(path.as_str()).chain(argv.iter().map(String::as_str)).collect(),
        _ => argv.iter().map(String::as_str).collect(),
    };
    let process_argv = serde_json::to_string(&std::iter::once("node").chain(script_argv).collect::<Vec<_>>()).unwrap_or_else(|_| "[]".to_owned());
    let run = if print {
        "console.log((0, eval)(source));"
    } else {
        "new Function('exports', 'require', 'module', '__filename', '__dirname', source)(module.exports, require, module, filename, require('path').dirname(filename));"
    };
    format!(
        r#"(() => {{
  process.argv = {process_argv};
  process.chdir({cwd});
  const filename = require('path').resolve({filename});
  const module = {{ exports: {{}} }};
  const source = {source};
  try {{
    {run}
  }} catch (error) {{
    // `process.exit()` ends the program through a throw of its own: passed on.
    if (error !== null && typeof error === 'object' && error.constructor && error.constructor.name === 'ProcessExit') throw error;
    console.error(error instanceof Error && error.stack ? `${{error.name}}: ${{error.message}}\n${{error.stack}}` : `Uncaught ${{require('util').inspect(error)}}`);
    process.exit(1);
  }}
}})();"#,
        cwd = literal(cwd),
        filename = literal(&filename),
    )
}

/// Runs `node ARGS` in a fresh instance on the session's tree.
pub(crate) async fn run(host: &NodeHost, args: &[String], cwd: &str, env: Vec<(String, String)>, stdin: &[u8]) -> ProgramExit {
    let (program, argv) = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => return ProgramExit::said(USAGE, "", &format!("{message}\n")),
    };
    if program == Program::Version {
        return ProgramExit::said(0, &format!("{VERSION}\n"), "");
    }
    let mut instance = host.fresh_instance();
    let report = instance.run(CellRequest { code: cell(&program, &argv, cwd, stdin), env, ..CellRequest::default() }).await;
    let mut stderr = report.output.stderr.into_bytes();
    let code = match &report.error {
        None => report.exit_code,
        // `process.exit(n)` with n > 0 ends the cell as a `ProcessExit`.
        Some(crate::ExecError::Exception { type_name, .. }) if type_name == "ProcessExit" => report.exit_code,
        // Thrown where the program's own catch could not see it (a timer's callback).
        Some(crate::ExecError::Exception { .. }) => {
            let trace = report.traceback.clone().unwrap_or_default();
            stderr.extend_from_slice(format!("{}\n", trace.trim_end()).as_bytes());
            1
        }
        Some(error) => {
            stderr.extend_from_slice(format!("node: stopped: {error}\n").as_bytes());
            STOPPED
        }
    };
    ProgramExit { code, stdout: report.output.stdout.into_bytes(), stderr }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn reads_the_command_line_as_node_does() {
        assert_eq!(parse(&args("-e 1 a b")), Ok((Program::Eval("1".into()), args("a b"))));
        assert_eq!(parse(&args("--print 2")), Ok((Program::Print("2".into()), vec![])));
        assert_eq!(parse(&args("--no-warnings app.js --flag")), Ok((Program::Script("app.js".into()), args("--flag"))));
        assert_eq!(parse(&[]), Ok((Program::Stdin, vec![])));
        assert_eq!(parse(&args("--version")), Ok((Program::Version, vec![])));
        assert!(parse(&args("-e")).is_err());
        assert!(parse(&args("--inspect app.js")).is_err());
    }
}
