//! Write quotas on a code-interpreter session's directory: enforced inside
//! the guest while the code writes, so a write past a quota fails there as
//! `OSError` and the host directory never holds more than the quota.

use crate::common;

use std::path::Path;

use anypath_sandbox::{CellReport, CellRequest, FileQuota, LimitOverrides, LiveInstance, Usage, directory_usage};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A session over `dir` under `quota`.
fn live(dir: &Path, quota: FileQuota) -> LiveInstance {
    common::python_sessions().live_instance(Some(dir.to_path_buf()), &LimitOverrides::default()).with_quota(quota)
}

/// 1 MiB for the session, no per-file cap below it, room for 16 entries.
fn session_quota() -> FileQuota {
    FileQuota { max_file_bytes: 64 * MIB, max_session_bytes: MIB, max_files: 16 }
}

fn run(instance: &mut LiveInstance, code: &str) -> CellReport {
    common::block_on(instance.run(CellRequest { code: code.into(), ..CellRequest::default() }))
}

/// Runs `code` after two helpers and returns its stdout; the code itself
/// must not raise. `attempt(name, action)` prints `name ok` or `name ERRNO`.
/// `fill(name, chunk)` appends `chunk` bytes at a time to `name` through one
/// unbuffered file until a write fails, and prints `filled BYTES ERRNO`.
fn attempts(instance: &mut LiveInstance, code: &str) -> String {
    let prelude = "import errno, os\n\
        def attempt(name, action):\n    \
            try:\n        \
                action()\n        \
                print(name, 'ok')\n    \
            except OSError as e:\n        \
                print(name, errno.errorcode.get(e.errno, e.errno))\n\
        def write(name, size, mode='wb'):\n    \
            with open(name, mode) as f:\n        \
                f.write(b'x' * size)\n\
        def fill(name, chunk):\n    \
            written = 0\n    \
            with open(name, 'ab', buffering=0) as f:\n        \
                try:\n            \
                    while True:\n                \
                        written += f.write(b'x' * chunk)\n        \
                except OSError as e:\n            \
                    print('filled', written, errno.errorcode.get(e.errno, e.errno))\n";
    let report = run(instance, &format!("{prelude}{code}"));
    assert_eq!(report.exit_code, 0, "{report:?}");
    report.output.stdout
}

/// The `filled BYTES ERRNO` line `fill` printed.
fn filled(stdout: &str) -> (u64, String) {
    let line = stdout.lines().find(|l| l.starts_with("filled ")).unwrap_or_else(|| panic!("no fill: {stdout:?}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[1].parse().expect("bytes written"), fields[2].to_owned())
}

/// The errno a write that crosses a quota on an already open stream reports.
/// The host fails it with the quota's errno, but the runner's wasi-libc
/// (wasip2) turns every failure of an open output stream into EIO without
/// asking `filesystem-error-code`; operations that return a filesystem error
/// code (open, create, truncate, pwrite, the first write after open or seek)
/// carry EDQUOT / EFBIG through.
fn crossing_errno(errno: &str, quota_errno: &str) -> bool {
    errno == quota_errno || errno == "EIO"
}

/// A fresh session directory, removed when the returned value is dropped.
fn temp_dir(name: &str) -> tempfile::TempDir {
    common::scratch(&format!("anypath-quota-{name}-"))
}

/// Sizes and entries under `dir`, walked with std::fs alone, independent of
/// the sandbox's own accounting.
fn host_usage(dir: &Path) -> (u64, u64) {
    let (mut bytes, mut entries) = (0, 0);
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let entry = entry.expect("entry");
        let meta = std::fs::symlink_metadata(entry.path()).expect("metadata");
        entries += 1;
        if meta.is_dir() {
            let (b, e) = host_usage(&entry.path());
            bytes += b;
            entries += e;
        } else if meta.is_file() {
            bytes += meta.len();
        }
    }
    (bytes, entries)
}

/// Boundary: the per-session byte quota. Writing 64 KiB chunks in a loop
/// fails inside the guest once the next chunk does not fit, the host
/// directory never holds more than the quota, and any further write gets
/// `EDQUOT` ("Quota exceeded" in the guest's libc).
#[test]
fn writing_past_the_session_quota_fails_with_edquot() {
    let tmp = temp_dir("session");
    let dir = tmp.path();
    let mut session = live(&dir, session_quota());
    let out = attempts(
        &mut session,
        "fill('big.bin', 65536)\n\
         try:\n    \
             write('more.bin', 1)\n\
         except OSError as e:\n    \
             print(e.errno == errno.EDQUOT, e.strerror)\n",
    );
    let (written, errno) = filled(&out);
    assert!(crossing_errno(&errno, "EDQUOT"), "{out}");
    assert!(written > MIB - 64 * KIB && written <= MIB, "the code wrote up to the quota: {out}");
    let refused = out.lines().nth(1).unwrap_or_default();
    assert!(refused.starts_with("True ") && refused.to_lowercase().contains("quota"), "{out}");
    let (bytes, _) = host_usage(&dir);
    assert!(bytes <= MIB, "the host directory holds {bytes} bytes, past the 1 MiB quota");
    assert_eq!(bytes, written, "what the guest was told it wrote is what the host holds");
    assert_eq!(session.quota_usage().map(|u| u.bytes), Some(written));
}

/// Boundary: the per-file cap. One file stops at `max_file_bytes`: the
/// write that would cross it fails, and any further write past it, appended
/// or at an offset, fails with `EFBIG`, while other files still take writes.
#[test]
fn one_file_past_its_cap_fails_with_efbig_and_small_files_still_work() {
    let tmp = temp_dir("file-cap");
    let dir = tmp.path();
    let mut session = live(&dir, FileQuota { max_file_bytes: 128 * KIB, max_session_bytes: MIB, max_files: 16 });
    let out = attempts(
        &mut session,
        "fill('big.bin', 65536)\n\
         attempt('append', lambda: write('big.bin', 1, 'ab'))\n\
         attempt('pwrite', lambda: os.pwrite(os.open('new.bin', os.O_WRONLY | os.O_CREAT), b'x', 200 * 1024))\n\
         for i in range(3):\n    \
             attempt(f'small{i}', lambda: write(f'small{i}.txt', 10240))\n\
         attempt('at-cap', lambda: write('cap.bin', 128 * 1024))\n",
    );
    let (written, errno) = filled(&out);
    assert_eq!(written, 128 * KIB, "{out}");
    assert!(crossing_errno(&errno, "EFBIG"), "{out}");
    let rest: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rest, ["append EFBIG", "pwrite EFBIG", "small0 ok", "small1 ok", "small2 ok", "at-cap ok"]);
    for entry in std::fs::read_dir(&dir).expect("read dir") {
        let entry = entry.expect("entry");
        let len = entry.metadata().expect("metadata").len();
        assert!(len <= 128 * KIB, "{:?} holds {len} bytes, past the per-file cap", entry.file_name());
    }
    assert_eq!(std::fs::metadata(dir.join("small2.txt")).expect("small file").len(), 10 * KIB);
}

/// Boundary: the per-session entry count. Creating more than `max_files`
/// files, directories or symlinks fails with `EDQUOT`; the directory never
/// holds more entries, and opening an existing file does not count again.
#[test]
fn creating_more_than_max_files_entries_fails_with_edquot() {
    let tmp = temp_dir("count");
    let dir = tmp.path();
    let mut session = live(&dir, FileQuota { max_file_bytes: MIB, max_session_bytes: MIB, max_files: 5 });
    let out = attempts(
        &mut session,
        "attempt('dir', lambda: os.mkdir('sub'))\n\
         for i in range(6):\n    \
             attempt(f'f{i}', lambda: write(f'sub/f{i}.txt', 1))\n\
         attempt('reopen', lambda: write('sub/f0.txt', 1, 'ab'))\n\
         attempt('mkdir', lambda: os.mkdir('other'))\n\
         attempt('symlink', lambda: os.symlink('sub/f0.txt', 'link'))\n",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        ["dir ok", "f0 ok", "f1 ok", "f2 ok", "f3 ok", "f4 EDQUOT", "f5 EDQUOT", "reopen ok", "mkdir EDQUOT", "symlink EDQUOT"]
    );
    let (_, entries) = host_usage(&dir);
    assert_eq!(entries, 5, "the directory holds at most max_files entries");
}

/// Boundary: every write path is checked, not only `write()` on a file
/// object: a sparse write far past the end (holes count by length), truncate
/// to a huge size by path and by file, `os.pwrite`, append mode, `os.write`
/// on a raw fd; hard links, which would count one file twice, are refused.
#[test]
fn other_write_paths_cannot_bypass_the_quota() {
    let tmp = temp_dir("bypass");
    let dir = tmp.path();
    let mut session = live(&dir, session_quota());
    let out = attempts(
        &mut session,
        "def sparse():\n    \
             with open('sparse.bin', 'wb') as f:\n        \
                 f.seek(10 * 1024 * 1024)\n        \
                 f.write(b'x')\n\
         attempt('sparse', sparse)\n\
         write('t.bin', 0)\n\
         attempt('os.truncate', lambda: os.truncate('t.bin', 10 * 1024 * 1024))\n\
         def truncate():\n    \
             with open('t.bin', 'r+b') as f:\n        \
                 f.truncate(1 << 40)\n\
         attempt('f.truncate', truncate)\n\
         def pwrite():\n    \
             fd = os.open('p.bin', os.O_WRONLY | os.O_CREAT)\n    \
             try:\n        \
                 os.pwrite(fd, b'p', 5 * 1024 * 1024)\n    \
             finally:\n        \
                 os.close(fd)\n\
         attempt('os.pwrite', pwrite)\n\
         attempt('os.link', lambda: os.link('t.bin', 't2.bin'))\n\
         print(sum(os.path.getsize(n) for n in os.listdir('.')))\n",
    );
    assert_eq!(out, "sparse EDQUOT\nos.truncate EDQUOT\nf.truncate EFBIG\nos.pwrite EDQUOT\nos.link EPERM\n0\n");

    // Append mode, one short-lived file object per chunk.
    let append = attempts(
        &mut session,
        "written = 0\n\
         try:\n    \
             while True:\n        \
                 write('append.bin', 65536, 'ab')\n        \
                 written += 65536\n\
         except OSError as e:\n    \
             print(written, errno.errorcode.get(e.errno))\n",
    );
    assert_eq!(append, format!("{MIB} EDQUOT\n"));
    assert_eq!(host_usage(&dir).0, MIB);

    // `os.write` on a raw descriptor, on a fresh quota (the host clears the directory).
    std::fs::remove_file(dir.join("append.bin")).expect("host removes a file");
    let raw = attempts(
        &mut session,
        "fd = os.open('raw.bin', os.O_WRONLY | os.O_CREAT)\n\
         written = 0\n\
         try:\n    \
             while True:\n        \
                 written += os.write(fd, b'r' * 100000)\n\
         except OSError as e:\n    \
             print('filled', written, errno.errorcode.get(e.errno))\n\
         attempt('again', lambda: os.pwrite(fd, b'r', written))\n\
         os.close(fd)\n",
    );
    let (written, errno) = filled(&raw);
    assert!(crossing_errno(&errno, "EDQUOT") && written <= MIB, "{raw}");
    assert!(raw.ends_with("again EDQUOT\n"), "{raw}");
    assert!(host_usage(&dir).0 <= MIB);
}

/// Boundary: files unlinked while still open. Their blocks stay on disk, so
/// a file removed but kept open in a global still counts in the next run,
/// where another near-quota file must fail; once closed it frees its bytes.
#[test]
fn unlinking_a_file_but_keeping_it_open_does_not_free_its_bytes() {
    let tmp = temp_dir("unlinked");
    let dir = tmp.path();
    let mut session = live(&dir, session_quota());
    let first = attempts(
        &mut session,
        "held = open('held.bin', 'wb')\n\
         attempt('fill', lambda: held.write(b'h' * 900 * 1024))\n\
         held.flush()\n\
         os.remove('held.bin')\n",
    );
    assert_eq!(first, "fill ok\n");
    assert_eq!(host_usage(&dir), (0, 0), "the held file is no longer in the directory");
    let second = attempts(
        &mut session,
        "attempt('again', lambda: write('other.bin', 900 * 1024))\n\
         attempt('truncate', lambda: os.truncate('other.bin', 900 * 1024))\n",
    );
    assert!(second.ends_with("truncate EDQUOT\n"), "the unlinked file still holds its 900 KiB: {second}");
    let again = second.lines().next().unwrap_or_default();
    assert!(crossing_errno(again.trim_start_matches("again "), "EDQUOT"), "{second}");
    assert!(host_usage(&dir).0 <= MIB - 900 * KIB, "{:?}", host_usage(&dir));
    assert_eq!(session.quota_usage().map(|u| u.bytes <= MIB), Some(true));
    // Once closed, its bytes are free again from the next run on.
    attempts(&mut session, "held.close()\n");
    let third = attempts(&mut session, "attempt('after-close', lambda: write('other.bin', 900 * 1024))\n");
    assert_eq!(third, "after-close ok\n");
}

/// Boundary: the recount at the start of each run. Deleting within a run
/// frees nothing until the run ends (conservative), but the next run starts
/// from what the directory holds, including deletions made by the host.
#[test]
fn usage_is_recounted_at_the_start_of_each_run() {
    let tmp = temp_dir("recount");
    let dir = tmp.path();
    std::fs::write(dir.join("upload.csv"), vec![b'u'; 640 * KIB as usize]).expect("upload");
    let mut session = live(&dir, session_quota());
    let first = attempts(
        &mut session,
        "fill('a.bin', 65536)\n\
         os.remove('a.bin')\n\
         attempt('after-remove', lambda: write('b.bin', 1))\n",
    );
    assert_eq!(filled(&first).0, 384 * KIB, "the upload counts from the first run: {first}");
    assert!(first.ends_with("after-remove EDQUOT\n"), "no credit within a run: {first}");
    assert_eq!(
        session.quota_usage(),
        Some(Usage { bytes: MIB, files: 3 }),
        "upload.csv, a.bin (removed, still counted) and b.bin"
    );
    std::fs::remove_file(dir.join("upload.csv")).expect("host deletes the upload");
    let second = attempts(&mut session, "attempt('fits-now', lambda: write('c.bin', 900 * 1024))\n");
    assert_eq!(second, "fits-now ok\n");
    assert_eq!(directory_usage(&dir), Usage { bytes: 900 * KIB, files: 2 });
    assert_eq!(session.quota_usage(), Some(Usage { bytes: 900 * KIB, files: 2 }));
}

/// Boundary: the quota follows the session across a restart. After a trap
/// drops the instance, the fresh one is still under the same quota.
#[test]
fn the_quota_survives_a_restart() {
    let tmp = temp_dir("restart");
    let dir = tmp.path();
    let mut session = live(&dir, session_quota());
    let bomb = common::block_on(session.run(CellRequest {
        code: "while True:\n    pass".into(),
        limits: LimitOverrides { fuel: Some(200_000_000), ..LimitOverrides::default() },
        ..CellRequest::default()
    }));
    assert!(bomb.state_reset, "{bomb:?}");
    let out = attempts(
        &mut session,
        "fd = os.open('big.bin', os.O_WRONLY | os.O_CREAT)\n\
         attempt('big', lambda: os.truncate(fd, 2 * 1024 * 1024))\n\
         os.close(fd)\n",
    );
    assert_eq!(out, "big EDQUOT\n");
    assert!(host_usage(&dir).0 <= MIB);
}
