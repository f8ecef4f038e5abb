//! A session's directory on the host, the one its code sees: its files
//! by flat name ([`session_files`]), the same directory as a tree for
//! clients that address files by path ([`tree`]), and the metadata a file
//! carries in its extended attributes ([`file_metadata`]). Nothing here
//! knows a session or the interpreter.

pub mod file_metadata;
pub mod session_files;
pub mod tree;
