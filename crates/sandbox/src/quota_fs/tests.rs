//! The quota filesystem's own checks: directory usage counts, without a guest.

use super::*;

/// A fresh directory, removed when the returned value is dropped.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("anypath-quota-{name}-")).tempdir().expect("temp dir")
}

#[test]
fn usage_counts_entries_and_file_bytes_without_following_symlinks() {
    let tmp = temp_dir("usage");
    let dir = tmp.path();
    std::fs::write(dir.join("a"), [0u8; 10]).expect("a");
    std::fs::create_dir(dir.join("sub")).expect("sub");
    std::fs::write(dir.join("sub/b"), [0u8; 5]).expect("b");
    std::os::unix::fs::symlink(dir, dir.join("sub/loop")).expect("symlink");
    assert_eq!(directory_usage(dir), Usage { bytes: 15, files: 4 });
    assert_eq!(directory_usage(&dir.join("missing")), Usage::default());
}

#[test]
fn reservations_stop_at_each_limit() {
    let quota = QuotaState::new(FileQuota { max_file_bytes: 100, max_session_bytes: 150, max_files: 1 });
    assert!(quota.admit_size(0, 100).is_ok());
    assert_eq!(quota.admit_size(0, 101).map_err(|e| e.raw_os_error()), Err(Some(libc::EFBIG)));
    assert_eq!(quota.admit_size(0, 51).map_err(|e| e.raw_os_error()), Err(Some(libc::EDQUOT)));
    assert!(quota.admit_size(40, 90).is_ok(), "only growth counts");
    assert_eq!(quota.usage(), Usage { bytes: 150, files: 0 });
    assert!(quota.reserve_entry().is_ok());
    assert!(quota.reserve_entry().is_err());
    quota.release_entry();
    assert_eq!(quota.usage().files, 0);
}
