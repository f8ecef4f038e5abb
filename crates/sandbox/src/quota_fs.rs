//! Write quotas on a session directory, enforced inside the guest while the
//! code writes.
//!
//! wasmtime-wasi's preopen has no notion of a quota, so this module serves
//! `wasi:filesystem/types` itself: every method goes to wasmtime-wasi's own
//! implementation, except those that can make the directory hold more bytes
//! or more entries, which are checked against [`FileQuota`] first. A refused
//! write fails in the guest as `OSError` and the host directory never holds
//! more than the quota.
//!
//! The error is `EDQUOT` (session bytes, entry count) or `EFBIG` (the
//! per-file cap) wherever WASI returns a filesystem error code: opening or
//! creating, truncating, `pwrite`, and a stream's creation, which is refused
//! when not one byte could be written through it (the first write after an
//! open or a seek, and any later write once the quota is full). A write that
//! crosses the quota on a stream already open fails as a stream error; the
//! host reports it with the same errno through `filesystem-error-code`, but
//! the runner's wasi-libc never asks and says `EIO` for every stream error.
//!
//! Accounting is conservative: the usage is recounted from the directory at
//! the start of a run when the directory may have changed since the last
//! count (the guest tried to change something, a new instance started, or
//! the host changed it: an upload, a delete), and during a run it only grows (deleting or
//! truncating a file frees nothing until the next run). Files the guest
//! unlinked but still holds open keep counting, since their blocks are still
//! on disk.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use serde::Serialize;
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi::filesystem::{Descriptor, OpenMode, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{DynOutputStream, FsError, FsResult, OutputStream, Pollable, StreamError, StreamResult};

/// Bounds on what code may write into its session directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FileQuota {
    /// Largest size one file may reach, in bytes.
    pub max_file_bytes: u64,
    /// Largest total of all file sizes in the directory, in bytes.
    pub max_session_bytes: u64,
    /// Most entries (files, directories, symlinks) the directory may hold, at any depth.
    pub max_files: u64,
}

/// What a directory holds, as the quota counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Sum of the sizes of the regular files.
    pub bytes: u64,
    /// Entries of any kind below the directory (the directory itself excluded).
    pub files: u64,
}

/// Counts what `dir` holds, recursively, without following symlinks: every
/// entry counts toward `files`, regular files add their size to `bytes`.
/// An unreadable entry counts as one empty entry; a missing `dir` holds nothing.
pub fn directory_usage(dir: &Path) -> Usage {
    let mut usage = Usage::default();
    let mut pending = vec![dir.to_path_buf()];
    // Iterative, so a deep tree cannot exhaust the host stack.
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else { continue };
        for entry in entries.flatten() {
            usage.files = usage.files.saturating_add(1);
            // `DirEntry::metadata` does not traverse symlinks.
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                usage.bytes = usage.bytes.saturating_add(meta.len());
            }
        }
    }
    usage
}

/// A quota's live counters, shared by a session's instances and their streams.
pub(crate) struct QuotaState {
    limits: FileQuota,
    used_bytes: AtomicU64,
    used_files: AtomicU64,
    /// Every file the guest opened: an unlinked file still open holds its
    /// blocks, and only these handles can find it.
    open_files: Mutex<Vec<Weak<std::fs::File>>>,
    /// Writes or creations refused since the last recount: the guest may see
    /// a plain EIO for a refused write on an open stream, so the report says it.
    refusals: AtomicU64,
    /// The guest has tried to change a file or directory since the last
    /// recount (any write, creation, rename, removal, resize or new time).
    touched: AtomicBool,
    /// The counters may not match the directories: never counted, a new
    /// instance, or a change from outside the guest (an upload, a delete).
    stale: AtomicBool,
}

/// Where a write lands in its file.
#[derive(Debug, Clone, Copy)]
enum WriteAt {
    Offset(u64),
    Append,
}

impl QuotaState {
    pub(crate) fn new(limits: FileQuota) -> Self {
        let open_files = Mutex::new(Vec::new());
        Self {
            limits,
            used_bytes: AtomicU64::new(0),
            used_files: AtomicU64::new(0),
            open_files,
            refusals: AtomicU64::new(0),
            touched: AtomicBool::new(false),
            stale: AtomicBool::new(true),
        }
    }

    /// Whether the counters must be recounted before the next run: the
    /// directories changed since the last count, from inside or outside.
    /// A run that changed nothing leaves them exact, so the next run need
    /// not walk the directories again.
    pub(crate) fn needs_recount(&self) -> bool {
        self.stale.load(Ordering::Acquire) || self.touched.load(Ordering::Acquire)
    }

    /// The directories were changed from outside the guest (or a new
    /// instance starts): the next run recounts.
    pub(crate) fn invalidate(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// Whether the guest tried to change a file or directory since the last
    /// recount: when not, what a run left is what it found.
    pub(crate) fn touched(&self) -> bool {
        self.touched.load(Ordering::Acquire)
    }

    /// Marks the counters stale when `file` is unlinked: dropping a handle
    /// on it may free blocks the counters still hold.
    fn invalidate_if_unlinked(&self, file: &std::fs::File) {
        if file.metadata().is_ok_and(|meta| meta.nlink() == 0) {
            self.invalidate();
        }
    }

    fn mark_touched(&self) {
        self.touched.store(true, Ordering::Release);
    }

    /// The counters now: the last recount plus what this run has reserved since.
    pub(crate) fn usage(&self) -> Usage {
        Usage { bytes: self.used_bytes.load(Ordering::Acquire), files: self.used_files.load(Ordering::Acquire) }
    }

    /// Resets the counters to what `dirs` hold, plus the files the guest
    /// unlinked but still holds open. Blocking; called between runs.
    pub(crate) fn recount(&self, dirs: &[&Path]) {
        let mut usage = Usage::default();
        for dir in dirs {
            let held = directory_usage(dir);
            usage.bytes = usage.bytes.saturating_add(held.bytes);
            usage.files = usage.files.saturating_add(held.files);
        }
        let mut open = self.open_files.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|file| file.strong_count() > 0);
        let mut seen = HashSet::new();
        for file in open.iter().filter_map(Weak::upgrade) {
            let Ok(meta) = file.metadata() else { continue };
            // Two handles on one unlinked inode hold its blocks once.
            if meta.nlink() == 0 && seen.insert((meta.dev(), meta.ino())) {
                usage.bytes = usage.bytes.saturating_add(meta.len());
            }
        }
        drop(open);
        self.used_bytes.store(usage.bytes, Ordering::Release);
        self.used_files.store(usage.files, Ordering::Release);
        self.refusals.store(0, Ordering::Release);
        self.touched.store(false, Ordering::Release);
        self.stale.store(false, Ordering::Release);
    }

    /// Whether a write or creation was refused since the last recount.
    pub(crate) fn refused(&self) -> bool {
        self.refusals.load(Ordering::Acquire) > 0
    }

    fn refuse<T, E>(&self, result: Result<T, E>) -> Result<T, E> {
        if result.is_err() {
            self.refusals.fetch_add(1, Ordering::AcqRel);
        }
        result
    }

    fn track(&self, file: &Arc<std::fs::File>) {
        let mut open = self.open_files.lock().unwrap_or_else(PoisonError::into_inner);
        // Closed files leave dead entries; sweep them before the list doubles.
        if open.len() >= 64 && open.len().is_power_of_two() {
            open.retain(|file| file.strong_count() > 0);
        }
        open.push(Arc::downgrade(file));
    }

    /// Reserves the growth a write of `len` bytes at `at` causes, or refuses it.
    fn admit_write(&self, file: &std::fs::File, at: WriteAt, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let current = file.metadata()?.len();
        self.refuse(self.admit_size(current, write_end(current, at, len)))
    }

    /// Refuses, as a write would be, when no write at `at` can succeed: not
    /// even one byte fits. Reserves nothing.
    fn check_writable(&self, file: &std::fs::File, at: WriteAt) -> io::Result<()> {
        let current = file.metadata()?.len();
        let growth = self.refuse(self.growth(current, write_end(current, at, 1)))?;
        let used = self.used_bytes.load(Ordering::Acquire);
        self.refuse(match used.checked_add(growth) {
            Some(total) if total <= self.limits.max_session_bytes => Ok(()),
            _ => Err(quota_exceeded()),
        })
    }

    /// Reserves growing a file from `current` bytes to `end`, or refuses it.
    fn admit_size(&self, current: u64, end: u64) -> io::Result<()> {
        let growth = self.growth(current, end)?;
        if growth == 0 {
            return Ok(());
        }
        let max = self.limits.max_session_bytes;
        let reserve = |used: u64| used.checked_add(growth).filter(|&total| total <= max);
        self.used_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, reserve)
            .map(drop)
            .map_err(|_| quota_exceeded())
    }

    /// What growing a file from `current` bytes to `end` adds, within the per-file cap.
    fn growth(&self, current: u64, end: u64) -> io::Result<u64> {
        if end > self.limits.max_file_bytes {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        // Overwrites inside the file cost nothing; sparse holes count by length.
        Ok(end.saturating_sub(current))
    }

    /// Reserves one more directory entry, or refuses with `quota`.
    fn reserve_entry(&self) -> FsResult<()> {
        let max = self.limits.max_files;
        let reserve = |used: u64| used.checked_add(1).filter(|&total| total <= max);
        self.refuse(self.used_files.fetch_update(Ordering::AcqRel, Ordering::Acquire, reserve).map(drop).map_err(|_| ErrorCode::Quota.into()))
    }

    /// Gives back an entry reserved for an operation that then failed.
    fn release_entry(&self) {
        let _ = self.used_files.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| used.checked_sub(1));
    }
}

/// Where a write of `len` bytes at `at` ends, in a file of `current` bytes.
fn write_end(current: u64, at: WriteAt, len: u64) -> u64 {
    let start = match at {
        WriteAt::Offset(offset) => offset,
        WriteAt::Append => current,
    };
    start.saturating_add(len)
}

fn quota_exceeded() -> io::Error {
    io::Error::from_raw_os_error(libc::EDQUOT)
}

/// A refused write as the error code wasi:filesystem reports.
fn fs_error(error: io::Error) -> FsError {
    match error.raw_os_error() {
        Some(libc::EDQUOT) => ErrorCode::Quota.into(),
        Some(libc::EFBIG) => ErrorCode::FileTooLarge.into(),
        _ => error.into(),
    }
}

/// A borrow of `fd` for a second call within one host call.
fn reborrow<T: 'static>(fd: &Resource<T>) -> Resource<T> {
    Resource::new_borrow(fd.rep())
}

/// The host file behind `fd` when it is a file open for writing: the only
/// kind whose writes can succeed, and so the only kind worth a reservation.
fn writable_file(table: &ResourceTable, fd: &Resource<Descriptor>) -> FsResult<Option<Arc<std::fs::File>>> {
    Ok(match table.get(fd)? {
        Descriptor::File(f) if f.open_mode.contains(OpenMode::WRITE) && !f.perms.write_not_permitted() => {
            Some(f.file.clone())
        }
        _ => None,
    })
}

/// Marker tying `wasi:filesystem/types` to [`QuotaFsView`] in the linker.
pub(crate) struct QuotaFs;

impl HasData for QuotaFs {
    type Data<'a> = QuotaFsView<'a>;
}

/// wasmtime-wasi's filesystem view plus the quota it must respect (none for
/// instances without a session directory: then every call passes through).
pub(crate) struct QuotaFsView<'a> {
    pub(crate) inner: WasiFilesystemCtxView<'a>,
    pub(crate) quota: Option<Arc<QuotaState>>,
    /// The instance's count of open file descriptors (the guest state's `open_files`).
    pub(crate) open_files: &'a mut usize,
}

impl QuotaFsView<'_> {
    /// Replaces the stream wasmtime-wasi made with one that checks each write.
    fn wrap_stream(
        &mut self,
        stream: Resource<DynOutputStream>,
        file: Arc<std::fs::File>,
        at: WriteAt,
        quota: Arc<QuotaState>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let inner = self.inner.table.delete(stream)?;
        let wrapped: DynOutputStream = Box::new(QuotaOutputStream { inner, file, at, quota });
        Ok(self.inner.table.push(wrapped)?)
    }

    /// Called before every operation that may change a file or directory:
    /// notes that the run touched the filesystem ([`QuotaState::touched`]),
    /// then refuses a change under a directory preopened read-only (`/data`)
    /// with `EROFS`, before any quota reservation: wasmtime-wasi would refuse
    /// it too, but as `EPERM`, which reads like a permission the code lacks
    /// rather than a read-only mount.
    fn changing(&self, fds: &[&Resource<types::Descriptor>]) -> FsResult<()> {
        if let Some(quota) = &self.quota {
            quota.mark_touched();
        }
        for fd in fds {
            let read_only = match self.inner.table.get(*fd)? {
                Descriptor::Dir(dir) => dir.perms.write_not_permitted(),
                // A file opened under a read-only preopen: a resize or new
                // times through it are refused the same way.
                Descriptor::File(file) => file.perms.write_not_permitted(),
            };
            if read_only {
                return Err(ErrorCode::ReadOnly.into());
            }
        }
        Ok(())
    }

    /// Reserves the entry an operation may create; `None` when there is no quota.
    fn reserve_entry(&self) -> FsResult<Option<Arc<QuotaState>>> {
        let Some(quota) = &self.quota else { return Ok(None) };
        quota.reserve_entry()?;
        Ok(Some(quota.clone()))
    }
}

/// Gives the reserved entry back when the operation failed (and so made none).
fn settle<R>(reserved: Option<Arc<QuotaState>>, result: &FsResult<R>) {
    if let Some(quota) = reserved
        && result.is_err()
    {
        quota.release_entry();
    }
}

impl types::Host for QuotaFsView<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        self.inner.convert_error_code(err)
    }

    fn filesystem_error_code(&mut self, err: Resource<wasmtime::Error>) -> wasmtime::Result<Option<ErrorCode>> {
        // wasmtime-wasi maps EDQUOT to `io`; a guest that asks why a stream
        // write failed must hear `quota` to raise EDQUOT.
        let error = self.inner.table.get(&err)?;
        if error.downcast_ref::<io::Error>().and_then(io::Error::raw_os_error) == Some(libc::EDQUOT) {
            return Ok(Some(ErrorCode::Quota));
        }
        self.inner.filesystem_error_code(err)
    }
}

impl HostDescriptor for QuotaFsView<'_> {
    async fn advise(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.inner.advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.inner.sync_data(fd).await
    }

    async fn get_flags(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::DescriptorFlags> {
        self.inner.get_flags(fd).await
    }

    async fn get_type(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::DescriptorType> {
        self.inner.get_type(fd).await
    }

    async fn set_size(&mut self, fd: Resource<types::Descriptor>, size: types::Filesize) -> FsResult<()> {
        self.changing(&[&fd])?;
        if let Some(quota) = &self.quota
            && let Some(file) = writable_file(self.inner.table, &fd)?
        {
            let current = file.metadata().map_err(fs_error)?.len();
            if size > current {
                quota.refuse(quota.admit_size(current, size)).map_err(fs_error)?;
            }
        }
        self.inner.set_size(fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<types::Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.changing(&[&fd])?;
        self.inner.set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<types::Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.inner.read(fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<types::Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        self.changing(&[&fd])?;
        if let Some(quota) = &self.quota
            && let Some(file) = writable_file(self.inner.table, &fd)?
        {
            quota.admit_write(&file, WriteAt::Offset(offset), buf.len() as u64).map_err(fs_error)?;
        }
        self.inner.write(fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        self.inner.read_directory(fd).await
    }

    async fn sync(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.inner.sync(fd).await
    }

    async fn create_directory_at(&mut self, fd: Resource<types::Descriptor>, path: String) -> FsResult<()> {
        self.changing(&[&fd])?;
        let reserved = self.reserve_entry()?;
        let result = self.inner.create_directory_at(fd, path).await;
        settle(reserved, &result);
        result
    }

    async fn stat(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::DescriptorStat> {
        self.inner.stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.inner.stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.changing(&[&fd])?;
        self.inner.set_times_at(fd, path_flags, path, atim, mtim).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.changing(&[&fd, &new_descriptor])?;
        // A hard link makes one file count twice in the directory while its
        // growth is reserved once, so under a quota there are none (and no
        // file under `/data` can become writable through one).
        if self.quota.is_some() {
            return Err(ErrorCode::NotPermitted.into());
        }
        self.inner.link_at(fd, old_path_flags, old_path, new_descriptor, new_path).await
    }

    async fn open_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        let changes = oflags.intersects(types::OpenFlags::CREATE | types::OpenFlags::TRUNCATE)
            || flags.intersects(types::DescriptorFlags::WRITE | types::DescriptorFlags::MUTATE_DIRECTORY);
        if changes {
            self.changing(&[&fd])?;
        }
        let Some(quota) = self.quota.clone() else {
            let opened = self.inner.open_at(fd, path_flags, path, oflags, flags).await?;
            if let Descriptor::File(_) = self.inner.table.get(&opened)? {
                *self.open_files += 1;
            }
            return Ok(opened);
        };
        // Anything short of proof that the entry exists may create it.
        let creates = oflags.contains(types::OpenFlags::CREATE)
            && self.inner.stat_at(reborrow(&fd), path_flags, path.clone()).await.is_err();
        let reserved = if creates { self.reserve_entry()? } else { None };
        let result = self.inner.open_at(fd, path_flags, path, oflags, flags).await;
        settle(reserved, &result);
        let opened = result?;
        if let Descriptor::File(f) = self.inner.table.get(&opened)? {
            quota.track(&f.file);
            *self.open_files += 1;
        }
        Ok(opened)
    }

    fn drop(&mut self, fd: Resource<types::Descriptor>) -> wasmtime::Result<()> {
        if let Ok(Descriptor::File(file)) = self.inner.table.get(&fd) {
            *self.open_files = self.open_files.saturating_sub(1);
            // Closing an unlinked file frees its blocks: the next run recounts.
            if let Some(quota) = &self.quota {
                quota.invalidate_if_unlinked(&file.file);
            }
        }
        HostDescriptor::drop(&mut self.inner, fd)
    }

    async fn readlink_at(&mut self, fd: Resource<types::Descriptor>, path: String) -> FsResult<String> {
        self.inner.readlink_at(fd, path).await
    }

    async fn remove_directory_at(&mut self, fd: Resource<types::Descriptor>, path: String) -> FsResult<()> {
        self.changing(&[&fd])?;
        self.inner.remove_directory_at(fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path: String,
        new_fd: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.changing(&[&fd, &new_fd])?;
        self.inner.rename_at(fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.changing(&[&fd])?;
        let reserved = self.reserve_entry()?;
        let result = self.inner.symlink_at(fd, src_path, dest_path).await;
        settle(reserved, &result);
        result
    }

    async fn unlink_file_at(&mut self, fd: Resource<types::Descriptor>, path: String) -> FsResult<()> {
        self.changing(&[&fd])?;
        self.inner.unlink_file_at(fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<wasmtime_wasi::p2::DynInputStream>> {
        self.inner.read_via_stream(fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.changing(&[&fd])?;
        let Some(quota) = self.quota.clone() else { return self.inner.write_via_stream(fd, offset) };
        let file = writable_file(self.inner.table, &fd)?;
        if let Some(file) = &file {
            quota.check_writable(file, WriteAt::Offset(offset)).map_err(fs_error)?;
        }
        let stream = self.inner.write_via_stream(fd, offset)?;
        match file {
            Some(file) => self.wrap_stream(stream, file, WriteAt::Offset(offset), quota),
            // wasmtime-wasi only hands out streams on writable files; refuse rather than pass one through unchecked.
            None => {
                let _ = self.inner.table.delete(stream);
                Err(ErrorCode::BadDescriptor.into())
            }
        }
    }

    fn append_via_stream(&mut self, fd: Resource<types::Descriptor>) -> FsResult<Resource<DynOutputStream>> {
        self.changing(&[&fd])?;
        let Some(quota) = self.quota.clone() else { return self.inner.append_via_stream(fd) };
        let file = writable_file(self.inner.table, &fd)?;
        if let Some(file) = &file {
            quota.check_writable(file, WriteAt::Append).map_err(fs_error)?;
        }
        let stream = self.inner.append_via_stream(fd)?;
        match file {
            Some(file) => self.wrap_stream(stream, file, WriteAt::Append, quota),
            None => {
                let _ = self.inner.table.delete(stream);
                Err(ErrorCode::BadDescriptor.into())
            }
        }
    }

    async fn is_same_object(
        &mut self,
        a: Resource<types::Descriptor>,
        b: Resource<types::Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner.is_same_object(a, b).await
    }

    async fn metadata_hash(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::MetadataHashValue> {
        self.inner.metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.inner.metadata_hash_at(fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for QuotaFsView<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        self.inner.read_directory_entry(stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}

/// A file's output stream that reserves each write's growth before passing it on.
struct QuotaOutputStream {
    inner: DynOutputStream,
    file: Arc<std::fs::File>,
    /// Where the next write lands; a positioned stream advances by what it accepted.
    at: WriteAt,
    quota: Arc<QuotaState>,
}

impl QuotaOutputStream {
    /// Reserves `len` bytes at the stream's position, or fails the write as
    /// the file system would: the stream stays usable for writes that fit.
    fn admit(&self, len: usize) -> StreamResult<()> {
        self.quota
            .admit_write(&self.file, self.at, len as u64)
            .map_err(|e| StreamError::LastOperationFailed(e.into()))
    }

    fn advance(&mut self, len: usize) {
        if let WriteAt::Offset(offset) = &mut self.at {
            *offset = offset.saturating_add(len as u64);
        }
    }
}

impl Drop for QuotaOutputStream {
    fn drop(&mut self) {
        self.quota.invalidate_if_unlinked(&self.file);
    }
}

#[async_trait::async_trait]
impl Pollable for QuotaOutputStream {
    async fn ready(&mut self) {
        self.inner.ready().await;
    }
}

#[async_trait::async_trait]
impl OutputStream for QuotaOutputStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let len = bytes.len();
        self.quota.mark_touched();
        self.admit(len)?;
        self.inner.write(bytes)?;
        self.advance(len);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        let len = bytes.len();
        self.quota.mark_touched();
        self.admit(len)?;
        self.inner.blocking_write_and_flush(bytes).await?;
        self.advance(len);
        Ok(())
    }

    fn write_zeroes(&mut self, len: usize) -> StreamResult<()> {
        self.quota.mark_touched();
        self.admit(len)?;
        self.inner.write_zeroes(len)?;
        self.advance(len);
        Ok(())
    }

    async fn write_ready(&mut self) -> StreamResult<usize> {
        self.inner.write_ready().await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await;
    }
}

#[cfg(test)]
mod tests;
