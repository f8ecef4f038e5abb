//! States shared copy-on-write: a live session's state frozen once
//! (`LiveInstance::share`) and mapped under each instance started from it
//! (`LiveInstance::resume_shared`), the way a fork's children and a
//! snapshot's sandboxes take it.
//!
//! The boundary these prove: instances that map one state share its pages
//! but never each other's writes. What a child writes, on pages its parent
//! and its siblings wrote too, stays its own; the parent's later writes
//! never reach a child.

use std::sync::Arc;

use crate::common;

use anypath_sandbox::state_image::SharedState;
use anypath_sandbox::{LiveInstance, SessionRuntime, StateOrigin};
use common::cells::{live, ok, run};

fn share(instance: &mut LiveInstance) -> Arc<SharedState> {
    common::block_on(instance.share()).expect("shared").expect("a live instance")
}

fn child_of(runtime: &SessionRuntime, state: &Arc<SharedState>) -> (LiveInstance, tempfile::TempDir) {
    let home = common::scratch("anypath-shared-child-");
    let mut child = live(runtime, home.path());
    child.resume_shared(state.clone());
    (child, home)
}

/// A live `python` session holding [`PARENT`]'s state, shared: the
/// parent, its home, and the state.
fn parent_of_16_mb(runtime: &SessionRuntime) -> (LiveInstance, tempfile::TempDir, Arc<SharedState>) {
    let home = common::scratch("anypath-shared-parent-");
    let mut parent = live(runtime, home.path());
    assert_eq!(ok(&run(&mut parent, PARENT)), "16777216\n");
    let state = share(&mut parent);
    (parent, home, state)
}

fn private_bytes(instance: &mut LiveInstance) -> u64 {
    common::block_on(instance.memory_regions()).expect("a live instance's memories").private_bytes()
}

/// Sixteen MB of random bytes, a list and a dict: most of the state is the
/// bytes, so a child that copied it would own at least as much.
const PARENT: &str = r#"
import os
blob = bytearray(os.urandom(16 << 20))
shared = [1, 2, 3]
marks = {"parent": "before"}
print(len(blob))
"#;

#[test]
fn children_of_a_shared_state_read_it_and_keep_their_writes_apart() {
    let runtime = common::python_sessions();
    let (mut parent, _home, state) = parent_of_16_mb(runtime);
    assert!(state.is_mapped(), "the runner's state is frozen for mapping");
    assert!(Arc::ptr_eq(&state, &share(&mut parent)), "a state unchanged since is frozen once");
    assert!(state.frozen_bytes() >= 16 << 20, "the frozen state holds the blob: {}", state.frozen_bytes());

    // The parent writes after the share, on the pages the children write.
    assert_eq!(ok(&run(&mut parent, "blob[0] = 255; blob[8 << 20] = 255; shared.append('parent'); marks['parent'] = 'after'; print('ok')")), "ok\n");

    let mut children: Vec<(LiveInstance, tempfile::TempDir)> = (0..3).map(|_| child_of(runtime, &state)).collect();
    for (i, (child, _)) in children.iter_mut().enumerate() {
        let first = run(child, &format!("blob[0] = {i}; blob[8 << 20] = {i}; shared.append({i}); marks['child'] = {i}; print(len(blob), blob[1] == blob[1], shared, marks['parent'])"));
        assert_eq!(ok(&first), format!("16777216 True [1, 2, 3, {i}] before\n"), "child {i} sees the state as shared, not the parent's later writes");
        assert_eq!((first.state, first.state_reset), (StateOrigin::Resumed, false), "{first:?}");
    }
    for (i, (child, _)) in children.iter_mut().enumerate() {
        let again = run(child, "print(blob[0], blob[8 << 20], shared, marks)");
        assert_eq!(ok(&again), format!("{i} {i} [1, 2, 3, {i}] {{'parent': 'before', 'child': {i}}}\n"), "child {i} sees only its own writes");
        assert_eq!(again.state, StateOrigin::Kept);
    }
    let parent_now = run(&mut parent, "print(blob[0], blob[8 << 20], shared, marks)");
    assert_eq!(ok(&parent_now), "255 255 [1, 2, 3, 'parent'] {'parent': 'after'}\n", "no child's write reaches the parent");

    // Sharing, not copying: a child owns a small part of what it reads.
    let owned = private_bytes(&mut children[0].0);
    assert!(owned < 8 << 20, "a child that ran two cells owns {owned} bytes of a 16 MB state");

    // Pages given back come back as the state's, not the runtime's image.
    let given = common::block_on(children[1].0.give_back_unchanged_pages());
    let after = run(&mut children[1].0, "print(blob[0], shared, marks['parent'], len(blob))");
    assert_eq!(ok(&after), "1 [1, 2, 3, 1] before 16777216\n", "giving back {given} bytes kept the child's state");
}

#[test]
fn a_child_hibernates_resumes_and_is_shared_again() {
    let runtime = common::python_sessions();
    let (_parent, _home, state) = parent_of_16_mb(runtime);
    let (mut child, child_home) = child_of(runtime, &state);
    assert_eq!(ok(&run(&mut child, "blob[5] = 7; marks['child'] = 'one'; print('ok')")), "ok\n");

    // Its capture holds the parent's state it never wrote as well as its own.
    let image = common::block_on(child.hibernate()).expect("captured").expect("a live instance");
    let mut resumed = live(runtime, child_home.path()).with_saved_state(image);
    let report = run(&mut resumed, "print(len(blob), blob[5], shared, marks)");
    assert_eq!(ok(&report), "16777216 7 [1, 2, 3] {'parent': 'before', 'child': 'one'}\n");
    assert_eq!(report.state, StateOrigin::Resumed);

    // A grandchild of the resumed child, and one of a child still mapped.
    let (mut mapped_child, _mapped_home) = child_of(runtime, &state);
    assert_eq!(ok(&run(&mut mapped_child, "marks['child'] = 'two'; print('ok')")), "ok\n");
    for (mut from, expected) in [(resumed, "one"), (mapped_child, "two")] {
        let again = share(&mut from);
        let (mut grandchild, _home) = child_of(runtime, &again);
        let report = run(&mut grandchild, "print(len(blob), shared, marks)");
        assert_eq!(ok(&report), format!("16777216 [1, 2, 3] {{'parent': 'before', 'child': '{expected}'}}\n"));
    }
}

#[test]
fn a_shared_state_is_restored_from_its_image_where_it_cannot_be_mapped() {
    // The same state handed to another runtime's instance is refused by
    // its identity, and the run starts fresh and says so: never a wrong map.
    let runtime = common::python_sessions();
    let home = common::scratch("anypath-shared-parent-");
    let mut parent = live(runtime, home.path());
    assert_eq!(ok(&run(&mut parent, "x = 41; print(x)")), "41\n");
    let state = share(&mut parent);
    let data = common::data_sandbox();
    let (mut elsewhere, _home) = child_of(data, &state);
    let report = run(&mut elsewhere, "print(globals().get('x'))");
    assert_eq!(ok(&report), "None\n");
    assert!(report.state_reset, "the state of another runtime is not taken: {report:?}");
}

#[test]
fn many_children_share_the_state_in_the_process_memory() {
    // The memory budget counts the pages each child owns; the process's own
    // count (`/proc/self/smaps_rollup`) must agree that the state is held
    // once, not once per child.
    let runtime = common::python_sessions();
    let (_parent, _home, state) = parent_of_16_mb(runtime);
    let before = rollup("Pss:");
    let mut children = Vec::new();
    let mut owned = 0;
    for i in 0..24 {
        let (mut child, home) = child_of(runtime, &state);
        assert_eq!(ok(&run(&mut child, &format!("blob[{i}] = 1; print(blob[{i}])"))), "1\n");
        owned += private_bytes(&mut child);
        children.push((child, home));
    }
    let grown = rollup("Pss:").saturating_sub(before);
    let copies = 24 * (16u64 << 20);
    assert!(grown < copies / 4, "24 children grew the process by {grown} bytes; copies would take {copies}");
    assert!(owned < grown + (16 << 20), "the budget's count of the children's own pages ({owned}) is at most what the process grew by ({grown}), give or take the state");
}

/// A field of `/proc/self/smaps_rollup`, in bytes.
fn rollup(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").expect("smaps_rollup");
    let line = text.lines().find(|line| line.starts_with(field)).expect("the field");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).expect("kB") * 1024
}

#[test]
fn a_data_runtime_state_is_shared_with_its_dataframe() {
    let runtime = common::data_sandbox();
    let home = common::scratch("anypath-shared-data-");
    let mut parent = live(runtime, home.path());
    let made = run(&mut parent, "import numpy as np, pandas as pd\ndf = pd.DataFrame({'k': np.arange(50_000) % 7, 'v': np.arange(50_000, dtype=float)})\nprint(df.shape)");
    assert_eq!(ok(&made), "(50000, 2)\n");
    let state = share(&mut parent);
    assert!(state.is_mapped(), "the data runtime's state is frozen for mapping");
    let (mut child, _child_home) = child_of(runtime, &state);
    let first = run(&mut child, "df['v'] *= 2; print(int(df['v'].sum()), df.groupby('k').size().iloc[0])");
    assert_eq!(ok(&first), "2499950000 7143\n");
    assert_eq!((first.state, first.state_reset), (StateOrigin::Resumed, false), "{first:?}");
    let parent_now = run(&mut parent, "print(int(df['v'].sum()))");
    assert_eq!(ok(&parent_now), "1249975000\n", "the child's write never reaches the parent");
}
