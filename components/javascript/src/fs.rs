//! The file operations under the prelude's `fs` module.
//!
//! Each opens and closes what it touches within the call, so no handle
//! stays open between cells (a saved state could not carry it). The
//! preopened directories confine every path to the session's tree; a path
//! outside it fails as a missing one does. Failures throw an `Error` shaped
//! as Node's (`code`, `errno`, `syscall`, `path`).

use std::fs;
use std::io::{self, ErrorKind, Write};
use std::time::SystemTime;

use rquickjs::function::Func;
use rquickjs::{Ctx, Exception, Object, Result, TypedArray};

/// Adds the file operations to `host` as `host.fs`.
pub fn install<'js>(ctx: &Ctx<'js>, host: &Object<'js>) -> Result<()> {
    let ops = Object::new(ctx.clone())?;
    ops.set("readBytes", Func::from(read_bytes))?;
    ops.set("readText", Func::from(read_text))?;
    ops.set("writeText", Func::from(write_text))?;
    ops.set("writeBytes", Func::from(write_bytes))?;
    ops.set(
        "exists",
        Func::from(|path: String| fs::metadata(path).is_ok()),
    )?;
    ops.set("readdir", Func::from(read_dir))?;
    ops.set("mkdir", Func::from(make_dir))?;
    ops.set(
        "unlink",
        Func::from(|ctx: Ctx<'js>, path: String| {
            check(&ctx, fs::remove_file(&path), "unlink", &path)
        }),
    )?;
    ops.set("rmdir", Func::from(remove_dir))?;
    ops.set("rm", Func::from(remove))?;
    ops.set("rename", Func::from(rename))?;
    ops.set("copyFile", Func::from(copy_file))?;
    ops.set("stat", Func::from(stat))?;
    ops.set("cwd", Func::from(cwd))?;
    ops.set(
        "chdir",
        Func::from(|ctx: Ctx<'js>, path: String| {
            check(&ctx, std::env::set_current_dir(&path), "chdir", &path)
        }),
    )?;
    host.set("fs", ops)
}

/// The whole file, as bytes.
fn read_bytes<'js>(ctx: Ctx<'js>, path: String) -> Result<TypedArray<'js, u8>> {
    let bytes = check(&ctx, fs::read(&path), "open", &path)?;
    TypedArray::new(ctx, bytes)
}

/// The whole file, as UTF-8 text (an invalid sequence becomes U+FFFD, as
/// Node decodes it).
fn read_text(ctx: Ctx<'_>, path: String) -> Result<String> {
    let bytes = check(&ctx, fs::read(&path), "open", &path)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })
}

/// Writes `data` to the file, replacing it or, with `append`, after it.
fn write_file(path: &str, data: &[u8], append: bool) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .append(append)
        .truncate(!append)
        .open(path)?;
    file.write_all(data)
}

fn write_text(ctx: Ctx<'_>, path: String, text: String, append: bool) -> Result<()> {
    check(
        &ctx,
        write_file(&path, text.as_bytes(), append),
        "open",
        &path,
    )
}

fn write_bytes<'js>(
    ctx: Ctx<'js>,
    path: String,
    data: TypedArray<'js, u8>,
    append: bool,
) -> Result<()> {
    // A detached buffer holds no bytes.
    let bytes = data.as_bytes().unwrap_or_default();
    check(&ctx, write_file(&path, bytes, append), "open", &path)
}

/// The directory's entries, by name, each `{ name, kind }` (`file`, `dir`,
/// `symlink` or `other`).
fn read_dir<'js>(ctx: Ctx<'js>, path: String) -> Result<Vec<Object<'js>>> {
    let listed: io::Result<Vec<(String, &str)>> = (|| {
        let mut entries = Vec::new();
        for entry in fs::read_dir(&path)? {
            let entry = entry?;
            let kind = entry.file_type().map_or("other", kind_of);
            entries.push((entry.file_name().to_string_lossy().into_owned(), kind));
        }
        // Sorted, so a listing does not depend on the host's file system.
        entries.sort();
        Ok(entries)
    })();
    let listed = check(&ctx, listed, "scandir", &path)?;
    listed
        .into_iter()
        .map(|(name, kind)| {
            let entry = Object::new(ctx.clone())?;
            entry.set("name", name)?;
            entry.set("kind", kind)?;
            Ok(entry)
        })
        .collect()
}

/// The kind a listing or `stat` names.
fn kind_of(file_type: fs::FileType) -> &'static str {
    if file_type.is_file() {
        "file"
    } else if file_type.is_dir() {
        "dir"
    } else if file_type.is_symlink() {
        "symlink"
    } else {
        "other"
    }
}

fn make_dir(ctx: Ctx<'_>, path: String, recursive: bool) -> Result<()> {
    let made = if recursive {
        fs::create_dir_all(&path)
    } else {
        fs::create_dir(&path)
    };
    check(&ctx, made, "mkdir", &path)
}

fn remove_dir(ctx: Ctx<'_>, path: String, recursive: bool) -> Result<()> {
    let removed = if recursive {
        fs::remove_dir_all(&path)
    } else {
        fs::remove_dir(&path)
    };
    check(&ctx, removed, "rmdir", &path)
}

/// Node's `rm`: a file, or with `recursive` a directory and all in it; with
/// `force`, a missing path is no error.
fn remove(ctx: Ctx<'_>, path: String, recursive: bool, force: bool) -> Result<()> {
    let metadata = match fs::symlink_metadata(&path) {
        Ok(metadata) => metadata,
        Err(error) if force && error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(error) => return check(&ctx, Err(error), "rm", &path),
    };
    let removed = if !metadata.is_dir() {
        fs::remove_file(&path)
    } else if recursive {
        fs::remove_dir_all(&path)
    } else {
        Err(io::Error::from(ErrorKind::IsADirectory))
    };
    check(&ctx, removed, "rm", &path)
}

fn rename(ctx: Ctx<'_>, from: String, to: String) -> Result<()> {
    fs::rename(&from, &to).map_err(|error| throw(&ctx, &error, "rename", &from, Some(&to)))
}

fn copy_file(ctx: Ctx<'_>, from: String, to: String) -> Result<()> {
    // `fs::copy` would also copy the permissions, which WASI cannot set.
    let copied = fs::read(&from).and_then(|data| write_file(&to, &data, false));
    copied.map_err(|error| throw(&ctx, &error, "copyfile", &from, Some(&to)))
}

/// `{ kind, size, mtimeMs, atimeMs, birthtimeMs }` of the path (of the link
/// itself when `follow` is false).
fn stat<'js>(ctx: Ctx<'js>, path: String, follow: bool) -> Result<Object<'js>> {
    let metadata = if follow {
        fs::metadata(&path)
    } else {
        fs::symlink_metadata(&path)
    };
    let metadata = check(&ctx, metadata, if follow { "stat" } else { "lstat" }, &path)?;
    let stats = Object::new(ctx)?;
    stats.set("kind", kind_of(metadata.file_type()))?;
    // Sizes past 2^53 are not files a session holds.
    stats.set("size", metadata.len() as f64)?;
    stats.set("mtimeMs", millis(metadata.modified()))?;
    stats.set("atimeMs", millis(metadata.accessed()))?;
    stats.set(
        "birthtimeMs",
        millis(metadata.created().or_else(|_| metadata.modified())),
    )?;
    Ok(stats)
}

/// Milliseconds since the epoch; 0 when the time is unknown.
fn millis(time: io::Result<SystemTime>) -> f64 {
    time.ok()
        .and_then(|time| time.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0.0, |since| since.as_secs_f64() * 1000.0)
}

fn cwd(ctx: Ctx<'_>) -> Result<String> {
    let dir = check(&ctx, std::env::current_dir(), "uv_cwd", ".")?;
    Ok(dir.to_string_lossy().into_owned())
}

/// `result`'s value, or its error thrown as Node's for `syscall` on `path`.
fn check<T>(ctx: &Ctx<'_>, result: io::Result<T>, syscall: &str, path: &str) -> Result<T> {
    result.map_err(|error| throw(ctx, &error, syscall, path, None))
}

/// Throws `error` as Node's: `ENOENT: no such file or directory, open 'x'`,
/// with `errno`, `code`, `syscall`, `path` (and `dest`).
fn throw(
    ctx: &Ctx<'_>,
    error: &io::Error,
    syscall: &str,
    path: &str,
    dest: Option<&str>,
) -> rquickjs::Error {
    let (code, errno, description) = node_code(error);
    let message = match dest {
        Some(dest) => format!("{code}: {description}, {syscall} '{path}' -> '{dest}'"),
        None => format!("{code}: {description}, {syscall} '{path}'"),
    };
    let exception = match Exception::from_message(ctx.clone(), &message) {
        Ok(exception) => exception,
        Err(error) => return error,
    };
    let object = exception.as_object();
    let set = || -> Result<()> {
        object.set("errno", -errno)?;
        object.set("code", code)?;
        object.set("syscall", syscall)?;
        object.set("path", path)?;
        if let Some(dest) = dest {
            object.set("dest", dest)?;
        }
        Ok(())
    };
    if let Err(error) = set() {
        return error;
    }
    exception.throw()
}

/// Node's code, errno (Linux's number, as Node reports it) and description
/// of an I/O error.
fn node_code(error: &io::Error) -> (&'static str, i32, &'static str) {
    match error.kind() {
        ErrorKind::NotFound => ("ENOENT", 2, "no such file or directory"),
        ErrorKind::AlreadyExists => ("EEXIST", 17, "file already exists"),
        ErrorKind::NotADirectory => ("ENOTDIR", 20, "not a directory"),
        ErrorKind::IsADirectory => ("EISDIR", 21, "illegal operation on a directory"),
        ErrorKind::DirectoryNotEmpty => ("ENOTEMPTY", 39, "directory not empty"),
        ErrorKind::PermissionDenied if is_eperm(error) => ("EPERM", 1, "operation not permitted"),
        ErrorKind::PermissionDenied => ("EACCES", 13, "permission denied"),
        ErrorKind::InvalidInput => ("EINVAL", 22, "invalid argument"),
        ErrorKind::CrossesDevices => ("EXDEV", 18, "cross-device link not permitted"),
        _ => ("EIO", 5, "i/o error"),
    }
}

/// Whether a permission error is EPERM rather than EACCES: the OS error's
/// number, in WASI's numbering on WebAssembly.
fn is_eperm(error: &io::Error) -> bool {
    const EPERM: i32 = if cfg!(target_os = "wasi") { 63 } else { 1 };
    error.raw_os_error() == Some(EPERM)
}
