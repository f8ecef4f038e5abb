//! What an instance does once, at the start of its first call.

use std::cell::Cell;
use std::io::Write;

/// The directories a session's files may be in, the preferred first: the
/// cells' relative paths start from the first one the instance has.
const WORKING_DIRECTORIES: [&str; 2] = ["/home/user", "/mnt/data"];

thread_local! {
    /// Whether the instance did its first-call work.
    static STARTED: Cell<bool> = const { Cell::new(false) };
}

/// Takes the host handles an instance's first call takes, in the same order
/// in every instance, whatever the call is.
///
/// The host restores saved memory images into fresh instances, and an image
/// refers to WASI handles by number: the stdout stream (which live frames
/// go out on, and which libc keeps once it is opened) and then the
/// preopened directory the working directory enters must get the same
/// numbers in the instance the image is restored into as in the one it was
/// saved from. The byte written is dropped by the host.
pub fn start() {
    if STARTED.with(|started| started.replace(true)) {
        return;
    }
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(b"\n").and_then(|()| stdout.flush());
    for directory in WORKING_DIRECTORIES {
        if std::env::set_current_dir(directory).is_ok() {
            break;
        }
    }
}
