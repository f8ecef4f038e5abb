//! `python` in the shell: the host side of the shell's one import. Each
//! command starts a fresh instance of the session's runtime on the same
//! tree (never a host process, never the session's live instance), runs
//! the program the arguments name, and gives back its exit code and output.
//! `python -m pip` (and the shell's `pip`) runs the runtimes' `anypath_pip`,
//! which installs from the operator's wheelhouse, seen at `/wheelhouse` by
//! that instance only.

use super::program::{ProgramExit, ProgramHost, STOPPED};
use crate::live::CellRequest;

/// Exit status of a program that raised (CPython's).
const RAISED: i32 = 1;
/// Exit status of bad arguments (CPython's usage error).
const USAGE: i32 = 2;
/// `pip` in the sandbox (see the module's own account): both runtimes have
/// it imported already; an instance that has not compiles this copy.
const PIP: &str = include_str!("../../../../components/python-runner/src/anypath_pip.py");

/// What a fresh Python instance for a command starts from: the session's
/// runtime, its tree as the session sees it, its limits and the wheelhouse.
pub type PythonHost = ProgramHost;

/// CPython's usage error.
fn usage(message: &str) -> ProgramExit {
    ProgramExit::said(USAGE, "", &format!("{message}\nusage: python [-c cmd | -m mod | file | -] [arg] ...\n"))
}

/// The program an argument list names, as CPython reads its command line.
#[derive(Debug, PartialEq, Eq)]
enum Program {
    /// `-c CODE`.
    Code(String),
    /// `-m MODULE`.
    Module(String),
    /// A script's path.
    Script(String),
    /// `-` or nothing: the program is stdin.
    Stdin,
    /// `-V`, `--version`.
    Version,
}

/// Reads `args` (without `python`) into the program and its `sys.argv`.
/// Options that change nothing here (`-u`, `-B`, `-I`, `-q`...) are taken
/// and ignored; `-W` and `-X` take their value along.
fn parse(args: &[String]) -> Result<(Program, Vec<String>), String> {
    let argv = |first: &str, from: usize| [vec![first.to_owned()], args.get(from..).unwrap_or_default().to_vec()].concat();
    let value = |at: usize, option: &str| args.get(at).cloned().ok_or_else(|| format!("Argument expected for the {option} option"));
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        match arg.as_str() {
            "-c" => return Ok((Program::Code(value(at + 1, "-c")?), argv("-c", at + 2))),
            "-m" => {
                let module = value(at + 1, "-m")?;
                return Ok((Program::Module(module.clone()), argv(&module, at + 2)));
            }
            "-V" | "--version" => return Ok((Program::Version, Vec::new())),
            "-W" | "-X" => {
                value(at + 1, arg)?;
                at += 1;
            }
            "-" => return Ok((Program::Stdin, argv("-", at + 1))),
            flag if flag.starts_with("-c") && flag.len() > 2 => return Ok((Program::Code(flag[2..].to_owned()), argv("-c", at + 1))),
            flag if flag.starts_with('-') && flag.len() > 1 => {
                if !flag[1..].chars().all(|c| "bBdEhiIOqsSuvx".contains(c)) {
                    return Err(format!("Unknown option: {flag}"));
                }
            }
            script => return Ok((Program::Script(script.to_owned()), argv(script, at + 1))),
        }
        at += 1;
    }
    Ok((Program::Stdin, vec![String::new()]))
}

/// Python's literal for `text`.
fn literal(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "''".to_owned())
}

/// The cell that runs `program` as `python` would: `sys.argv`, the working
/// directory and stdin set first; `SystemExit` and uncaught exceptions turned
/// into an exit status (the traceback on stderr), which is the cell's value.
fn cell(program: &Program, argv: &[String], cwd: &str, stdin: &[u8]) -> String {
    // A program's source is bound to a name first: a traceback through the
    // line that runs it then quotes that line, not the whole source.
    let (source, run) = match program {
        Program::Code(code) => (literal(code), "exec(compile(_anypath_source, '<string>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})".to_owned()),
        Program::Module(module) if module == "pip" => (
            literal(PIP),
            "_anypath_sys.exit((_anypath_sys.modules.get('anypath_pip') or _anypath_module('anypath_pip', _anypath_source)).main(_anypath_sys.argv))".to_owned(),
        ),
        Program::Module(module) => (literal(module), "__import__('runpy').run_module(_anypath_source, run_name='__main__', alter_sys=True)".to_owned()),
        Program::Script(path) => (literal(path), "__import__('runpy').run_path(_anypath_source, run_name='__main__')".to_owned()),
        Program::Stdin => ("None".to_owned(), "exec(compile(_anypath_sys.stdin.read(), '<stdin>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})".to_owned()),
        Program::Version => ("None".to_owned(), "print('Python %d.%d.%d' % _anypath_sys.version_info[:3])".to_owned()),
    };
    let argv = serde_json::to_string(argv).unwrap_or_else(|_| "[]".to_owned());
    let stdin = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, stdin);
    format!(
        r#"import sys as _anypath_sys, io as _anypath_io, os as _anypath_os, base64 as _anypath_b64
_anypath_sys.argv = {argv}
_anypath_source = {source}
_anypath_os.chdir({cwd})
_anypath_sys.stdin = _anypath_io.TextIOWrapper(_anypath_io.BytesIO(_anypath_b64.b64decode({stdin})))
def _anypath_input(prompt=''):
    if prompt:
        print(prompt, end='', flush=True)
    line = _anypath_sys.stdin.readline()
    if not line:
        raise EOFError('EOF when reading a line')
    return line[:-1] if line.endswith('\n') else line
__import__('builtins').input = _anypath_input
def _anypath_module(name, source):
    module = __import__('types').ModuleType(name)
    exec(compile(source, name, 'exec'), module.__dict__)
    _anypath_sys.modules[name] = module
    return module
try:
    {run}
    _anypath_exit = 0
except SystemExit as _anypath_e:
    _anypath_c = _anypath_e.code
    if _anypath_c is None:
        _anypath_exit = 0
    elif isinstance(_anypath_c, int):
        _anypath_exit = _anypath_c & 0xFF
    else:
        print(_anypath_c, file=_anypath_sys.stderr)
        _anypath_exit = 1
except BaseException as _anypath_e:
    # From the program's own frames, as `python` prints it (not this cell's).
    __import__('traceback').print_exception(type(_anypath_e), _anypath_e, _anypath_e.__traceback__.tb_next)
    _anypath_exit = {RAISED}
_anypath_sys.stdout.flush()
_anypath_sys.stderr.flush()
_anypath_exit"#,
        cwd = literal(cwd),
        stdin = literal(&stdin),
    )
}

/// Runs `python ARGS` in a fresh instance on the session's tree.
pub(crate) async fn run(host: &PythonHost, args: &[String], cwd: &str, env: Vec<(String, String)>, stdin: &[u8]) -> ProgramExit {
    let (program, argv) = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => return usage(&message),
    };
    let mut instance = host.fresh_instance();
    let report = instance.run(CellRequest { code: cell(&program, &argv, cwd, stdin), env, ..CellRequest::default() }).await;
    let mut stderr = report.output.stderr.into_bytes();
    let code = match (&report.error, report.results.last()) {
        (None, Some(result)) => result.text.trim().parse().unwrap_or(RAISED),
        (Some(error), _) => {
            stderr.extend_from_slice(format!("python: stopped: {error}\n").as_bytes());
            STOPPED
        }
        (None, None) => RAISED,
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
    fn reads_the_command_line_as_cpython_does() {
        assert_eq!(parse(&args("-c print(1) a b")), Ok((Program::Code("print(1)".into()), args("-c a b"))));
        assert_eq!(parse(&args("-u -m http.server 8000")), Ok((Program::Module("http.server".into()), args("http.server 8000"))));
        assert_eq!(parse(&args("-I script.py --flag")), Ok((Program::Script("script.py".into()), args("script.py --flag"))));
        assert_eq!(parse(&args("-W ignore x.py")), Ok((Program::Script("x.py".into()), args("x.py"))));
        assert_eq!(parse(&[]), Ok((Program::Stdin, vec![String::new()])));
        assert_eq!(parse(&args("--version")), Ok((Program::Version, vec![])));
        assert!(parse(&args("-c")).is_err());
        assert!(parse(&args("--nonsense")).is_err());
    }
}
