//! The sandbox layout on both runtimes' live instances: the session
//! directory is the code's whole tree, the code works in `/home/user`
//! (which `/mnt/data` also names), `/tmp` is the tree's own, and `..` stops
//! at the tree's root. Needs the runner and the data runtime, as
//! `interrupt_tests` does.

use crate::interrupt_tests::{python, python_data, runtime};
use crate::{CellRequest, FilesLayout, LimitOverrides, SessionRuntime};

const PROBE: &str = concat!(
    "import os\n",
    "print(os.getcwd())\n",
    "print(open('a.txt').read(), open('/home/user/a.txt').read(), open('/mnt/data/a.txt').read(), open(os.path.join('/root', 'r.txt')).read())\n",
    "open('/tmp/t.txt', 'w').write('tmp')\n",
    "open('/opt/o.txt', 'w').write('opt')\n",
    "try:\n",
    "    up = sorted(os.listdir('/../../..'))\n",
    "except OSError:\n",
    "    up = 'refused'\n",
    "print(sorted(os.listdir('/')), up in ('refused', sorted(os.listdir('/'))))\n",
);

fn probe(sessions: &SessionRuntime) {
    let dir = tempfile::Builder::new().prefix("anypath-layout-").tempdir().expect("a session directory");
    FilesLayout::Root.prepare(dir.path()).expect("laid out");
    std::fs::create_dir(dir.path().join("opt")).expect("a folder");
    std::fs::write(dir.path().join("home/user/a.txt"), "home").expect("written");
    std::fs::write(dir.path().join("root").join("r.txt"), "root").expect("written");
    let mut live = sessions.live_instance(Some(dir.path().to_path_buf()), &LimitOverrides::default()).with_layout(FilesLayout::Root);
    let report = runtime().block_on(live.run(CellRequest { code: PROBE.into(), ..CellRequest::default() }));
    assert!(report.error.is_none(), "{report:#?}");
    let lines: Vec<&str> = report.output.stdout.lines().collect();
    assert_eq!(lines[0], "/home/user", "the working directory");
    assert_eq!(lines[1], "home home home root");
    assert!(lines[2].contains("'home'") && lines[2].contains("'root'") && lines[2].contains("'tmp'"), "{}", lines[2]);
    // Boundary: `..` past the root is refused or stays at the root, never above it.
    assert!(lines[2].ends_with("True"), "{}", lines[2]);
    assert_eq!(std::fs::read_to_string(dir.path().join("tmp/t.txt")).expect("the tree's /tmp"), "tmp");
    assert_eq!(std::fs::read_to_string(dir.path().join("opt/o.txt")).expect("the tree's /opt"), "opt");
    let second = runtime().block_on(live.run(CellRequest { code: "import os; print(os.getcwd())".into(), ..CellRequest::default() }));
    assert_eq!(second.output.stdout, "/home/user\n", "{second:#?}");
}

#[test]
fn the_sandbox_layout_is_the_codes_whole_tree_on_python() {
    probe(python());
}

#[test]
fn the_sandbox_layout_is_the_codes_whole_tree_on_python_data() {
    probe(python_data());
}

/// The code interpreter's own layout is unchanged: `/mnt/data`, and no
/// tree above it to write in.
#[test]
fn the_mnt_data_layout_shows_nothing_above_it() {
    for sessions in [python(), python_data()] {
        let dir = tempfile::Builder::new().prefix("anypath-layout-").tempdir().expect("a session directory");
        let mut live = sessions.live_instance(Some(dir.path().to_path_buf()), &LimitOverrides::default());
        let code = "import os\nprint(os.getcwd())\ntry:\n    open('/srv/x.txt', 'w')\n    print('written')\nexcept OSError:\n    print('refused')";
        let report = runtime().block_on(live.run(CellRequest { code: code.into(), ..CellRequest::default() }));
        assert_eq!(report.output.stdout, "/mnt/data\nrefused\n", "{report:#?}");
    }
}
