//! Watching a sandbox's directories as envd does: each change as the
//! events inotify gives for it, named relative to the watched directory,
//! with the entry when asked for (`include_entry`), in subfolders made
//! after the watch began too (`recursive`).
//!
//! A change made through this API is told to every watch of its sandbox
//! when it is made ([`Watchers::publish`]), as the events envd's own call
//! would raise: a new file `create`, `chmod`, `write`; a rewritten one
//! `chmod`, `write`; a new folder (and each folder made for a file)
//! `create`; a removal `remove`; a move `rename` then `create`. What the
//! code changes is found by comparing the tree with what the watch last
//! saw ([`Watch::poll`]); what was told is part of what it saw, so nothing
//! is told twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use anypath_interpreter::{Entry, EntryKind};
use serde_json::{Value, json};

/// Each entry under a watched directory, by its path relative to it.
pub(crate) type Tree = BTreeMap<String, Entry>;

/// What a call did to a sandbox's tree, by paths of the tree.
pub(crate) enum Change<'a> {
    /// A file written (made, or replaced), and the folders made for it.
    Wrote(&'a Entry),
    /// A folder made, and the folders made for it.
    MadeDir(&'a Entry),
    /// A file or folder removed.
    Removed(&'a str),
    /// A file or folder moved from `from` to `to`.
    Moved { from: &'a str, to: &'a Entry },
}

/// One watch of a sandbox's directory.
pub(crate) struct Watch {
    pub(crate) sandbox_id: String,
    pub(crate) tenant: String,
    /// The watched directory, as a path of the tree.
    pub(crate) root: String,
    pub(crate) recursive: bool,
    pub(crate) include_entry: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The tree as the watch last saw or was told it.
    seen: Tree,
    /// Events not handed out yet.
    pending: Vec<Value>,
    /// Counts what was told, so a comparison made across a telling is made again.
    told: u64,
}

impl Watch {
    pub(crate) fn new(sandbox_id: &str, tenant: &str, root: String, recursive: bool, include_entry: bool, seen: Tree) -> Self {
        let state = State { seen, ..State::default() };
        Self { sandbox_id: sandbox_id.to_owned(), tenant: tenant.to_owned(), root, recursive, include_entry, state: Mutex::new(state) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many changes were told so far (see [`Self::poll`]).
    pub(crate) fn told(&self) -> u64 {
        self.state().told
    }

    /// Compares `now` (the tree listed after [`Self::told`] gave `told`)
    /// with what the watch saw, and hands out every event since: false,
    /// with nothing handed out, when a change was told meanwhile (the
    /// listing may predate it: list again).
    pub(crate) fn poll(&self, told: u64, now: Tree) -> Option<Vec<Value>> {
        let mut state = self.state();
        if state.told != told {
            return None;
        }
        let found = changes(&state.seen, &now, self.include_entry);
        state.pending.extend(found);
        state.seen = now;
        Some(std::mem::take(&mut state.pending))
    }

    /// The name of the tree's `path` in this watch, when the watch covers it.
    fn name_of<'p>(&self, path: &'p str) -> Option<&'p str> {
        let name = if self.root.is_empty() { path } else { path.strip_prefix(self.root.as_str())?.strip_prefix('/')? };
        (!name.is_empty() && (self.recursive || !name.contains('/'))).then_some(name)
    }

    /// Tells the watch of a change made through the API.
    fn tell(&self, change: &Change<'_>) {
        let mut state = self.state();
        state.told += 1;
        let mut events = Vec::new();
        match change {
            Change::Wrote(entry) => {
                self.folders_made(&mut state, &mut events, entry, false);
                if let Some(name) = self.name_of(&entry.path) {
                    let with = self.include_entry.then_some(*entry);
                    if state.seen.insert(name.to_owned(), (*entry).clone()).is_none() {
                        events.push(event(name, "EVENT_TYPE_CREATE", with));
                    }
                    events.push(event(name, "EVENT_TYPE_CHMOD", with));
                    events.push(event(name, "EVENT_TYPE_WRITE", with));
                }
            }
            Change::MadeDir(entry) => self.folders_made(&mut state, &mut events, entry, true),
            Change::Removed(path) => {
                if let Some(name) = self.name_of(path) {
                    forget_below(&mut state.seen, name);
                    events.push(event(name, "EVENT_TYPE_REMOVE", None));
                }
            }
            Change::Moved { from, to } => {
                if let Some(name) = self.name_of(from) {
                    forget_below(&mut state.seen, name);
                    events.push(event(name, "EVENT_TYPE_RENAME", None));
                }
                if let Some(name) = self.name_of(&to.path) {
                    // What the folder held is seen under its new name at the next look.
                    state.seen.insert(name.to_owned(), (*to).clone());
                    events.push(event(name, "EVENT_TYPE_CREATE", self.include_entry.then_some(*to)));
                }
            }
        }
        state.pending.extend(events);
    }
}

impl Watch {
    /// A `create` for each folder above `entry` (and `entry` itself, when
    /// `itself`) the watch did not see: the call made it.
    fn folders_made(&self, state: &mut State, events: &mut Vec<Value>, entry: &Entry, itself: bool) {
        let mut folders: Vec<&str> = entry.path.match_indices('/').map(|(at, _)| &entry.path[..at]).collect();
        if itself {
            folders.push(&entry.path);
        }
        for folder in folders {
            let Some(name) = self.name_of(folder) else { continue };
            if state.seen.contains_key(name) {
                continue;
            }
            let made = if folder == entry.path {
                entry.clone()
            } else {
                let last = folder.rsplit('/').next().unwrap_or(folder).to_owned();
                Entry { name: last, path: folder.to_owned(), kind: EntryKind::Directory, size: 0, mode: 0o755, modified: entry.modified, metadata: BTreeMap::new(), symlink_target: None }
            };
            // The entry of a folder made on the way is not looked up: envd's is best effort too.
            let with = (self.include_entry && folder == entry.path).then_some(&made);
            events.push(event(name, "EVENT_TYPE_CREATE", with));
            state.seen.insert(name.to_owned(), made);
        }
    }
}

/// Forgets `name` and everything below it.
fn forget_below(seen: &mut Tree, name: &str) {
    let below = format!("{name}/");
    seen.retain(|path, _| path != name && !path.starts_with(&below));
}

/// One `FilesystemEvent`.
fn event(name: &str, kind: &str, entry: Option<&Entry>) -> Value {
    let mut event = json!({ "name": name, "type": kind });
    if let Some(entry) = entry {
        event["entry"] = super::filesystem::entry_json(entry);
    }
    event
}

/// The events that turn `before` into `after`: a new file `create` and
/// `write` (the code made it and wrote it), a new folder `create`, a file
/// whose size or time changed `write`, what is gone `remove`.
fn changes(before: &Tree, after: &Tree, include_entry: bool) -> Vec<Value> {
    let mut events = Vec::new();
    for (name, now) in after {
        let with = include_entry.then_some(now);
        match before.get(name) {
            None => {
                events.push(event(name, "EVENT_TYPE_CREATE", with));
                if now.kind == EntryKind::File {
                    events.push(event(name, "EVENT_TYPE_WRITE", with));
                }
            }
            Some(was) if now.kind == EntryKind::File && (was.size, was.modified, was.kind) != (now.size, now.modified, now.kind) => {
                events.push(event(name, "EVENT_TYPE_WRITE", with));
            }
            _ => {}
        }
    }
    for name in before.keys().filter(|name| !after.contains_key(*name)) {
        events.push(event(name, "EVENT_TYPE_REMOVE", None));
    }
    events
}

/// Every watch of every sandbox: the unary ones by their id, the streamed
/// ones by an id of their own while their stream lasts.
#[derive(Default)]
pub(crate) struct Watchers {
    watches: Mutex<HashMap<String, Arc<Watch>>>,
}

impl Watchers {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Watch>>> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `watch`; its id.
    pub(crate) fn add(&self, watch: Watch) -> (String, Arc<Watch>) {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let watch = Arc::new(watch);
        self.table().insert(id.clone(), watch.clone());
        (id, watch)
    }

    /// The watch `id` of `sandbox_id`, for `tenant`.
    pub(crate) fn get(&self, id: &str, sandbox_id: &str, tenant: &str) -> Option<Arc<Watch>> {
        self.table().get(id).filter(|w| w.sandbox_id == sandbox_id && w.tenant == tenant).cloned()
    }

    /// Ends the watch `id` of `sandbox_id`, for `tenant`.
    pub(crate) fn remove(&self, id: &str, sandbox_id: &str, tenant: &str) {
        let mut table = self.table();
        if table.get(id).is_some_and(|w| w.sandbox_id == sandbox_id && w.tenant == tenant) {
            table.remove(id);
        }
    }

    /// Ends a streamed watch.
    pub(crate) fn drop_stream(&self, id: &str) {
        self.table().remove(id);
    }

    /// Forgets the watches of a sandbox that is gone.
    pub(crate) fn forget_sandbox(&self, sandbox_id: &str) {
        self.table().retain(|_, w| w.sandbox_id != sandbox_id);
    }

    /// Tells every watch of `sandbox_id` of a change made through the API.
    pub(crate) fn publish(&self, sandbox_id: &str, change: Change<'_>) {
        let watches: Vec<Arc<Watch>> = self.table().values().filter(|w| w.sandbox_id == sandbox_id).cloned().collect();
        for watch in watches {
            watch.tell(&change);
        }
    }
}

/// The tree `entries` (a listing of `root`) as a watch keeps it.
pub(crate) fn tree_of(root: &str, entries: Vec<Entry>) -> Tree {
    let prefix = if root.is_empty() { String::new() } else { format!("{root}/") };
    entries.into_iter().map(|e| (e.path.strip_prefix(&prefix).unwrap_or(&e.path).to_owned(), e)).collect()
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds)
    }

    fn entry(path: &str, kind: EntryKind, size: u64, modified: u64) -> Entry {
        let name = path.rsplit('/').next().unwrap_or(path).to_owned();
        Entry { name, path: path.to_owned(), kind, size, mode: 0o644, modified: at(modified), metadata: BTreeMap::new(), symlink_target: None }
    }

    fn kinds(events: &[Value]) -> Vec<(String, String)> {
        events.iter().map(|e| (e["name"].as_str().unwrap_or("").to_owned(), e["type"].as_str().unwrap_or("").to_owned())).collect()
    }

    fn pair(name: &str, kind: &str) -> (String, String) {
        (name.to_owned(), format!("EVENT_TYPE_{kind}"))
    }

    #[test]
    fn the_codes_changes_are_found_by_comparing() {
        let before: Tree = [("a".to_owned(), entry("a", EntryKind::File, 1, 0)), ("gone".to_owned(), entry("gone", EntryKind::File, 1, 0))].into();
        let after: Tree = [("a".to_owned(), entry("a", EntryKind::File, 2, 1)), ("new".to_owned(), entry("new", EntryKind::Directory, 0, 1)), ("new/f".to_owned(), entry("new/f", EntryKind::File, 3, 1))].into();
        let events = changes(&before, &after, false);
        assert_eq!(kinds(&events), [pair("a", "WRITE"), pair("new", "CREATE"), pair("new/f", "CREATE"), pair("new/f", "WRITE"), pair("gone", "REMOVE")]);
    }

    #[test]
    fn a_write_in_a_new_subfolder_is_told_as_envd_raises_it_and_not_again() {
        let watch = Watch::new("s", "t", "home/user/w".to_owned(), true, true, Tree::new());
        let dir = entry("home/user/w/sub", EntryKind::Directory, 4096, 1);
        let file = entry("home/user/w/sub/f.txt", EntryKind::File, 5, 1);
        watch.tell(&Change::Wrote(&file));
        let told = watch.told();
        let now = tree_of("home/user/w", vec![dir.clone(), file.clone()]);
        let events = watch.poll(told, now.clone()).expect("nothing told meanwhile");
        assert_eq!(kinds(&events), [pair("sub", "CREATE"), pair("sub/f.txt", "CREATE"), pair("sub/f.txt", "CHMOD"), pair("sub/f.txt", "WRITE")]);
        assert_eq!(events[3]["entry"]["path"], "/home/user/w/sub/f.txt");
        assert!(watch.poll(told, now).expect("polled").is_empty(), "told once");
        let plain = Watch::new("s", "t", "home/user/w".to_owned(), false, false, Tree::new());
        plain.tell(&Change::Wrote(&file));
        let listed = tree_of("home/user/w", vec![dir.clone()]);
        assert_eq!(kinds(&plain.poll(plain.told(), listed).expect("polled")), [pair("sub", "CREATE")], "not below its own folder");
        let stale = plain.told();
        plain.tell(&Change::Removed("home/user/w/sub"));
        assert!(plain.poll(stale, Tree::new()).is_none(), "a listing older than a telling is made again");
    }
}
