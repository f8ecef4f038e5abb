//! The records of one host ([`SharedRecords`] without a fleet): each kind
//! kept in memory and written to a JSON file of its own under the
//! interpreter's root, so a restarted host finds them again. A fleet keeps
//! the same records in its coordination store instead; callers see one trait.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::InterpreterError;
use crate::stores::shared_records::{Fields, RecordCall, SharedRecords};

/// Records by kind, then by id.
type Kinds = BTreeMap<String, BTreeMap<String, Fields>>;

/// Records kept on this host's disk.
pub struct LocalRecords {
    dir: PathBuf,
    kinds: Mutex<Kinds>,
    /// Held while a kind's file is written, so an older write never lands last.
    writing: Arc<tokio::sync::Mutex<()>>,
}

impl LocalRecords {
    /// The records under `dir` (made when missing); a file that does not
    /// parse is set aside and its kind starts empty.
    pub fn open(dir: &Path) -> Result<Self, InterpreterError> {
        std::fs::create_dir_all(dir).map_err(|e| InterpreterError::io("creating the records directory", e))?;
        let mut kinds = Kinds::new();
        let entries = std::fs::read_dir(dir).map_err(|e| InterpreterError::io("reading the records directory", e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(kind) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".json")) else { continue };
            match std::fs::read(&path).map(|bytes| serde_json::from_slice::<BTreeMap<String, Fields>>(&bytes)) {
                Ok(Ok(records)) => {
                    kinds.insert(kind.to_owned(), records);
                }
                Ok(Err(error)) => {
                    tracing::warn!(file = %path.display(), %error, "a records file does not parse; its kind starts empty");
                    let _ = std::fs::rename(&path, path.with_extension("json.unreadable"));
                }
                Err(error) => tracing::warn!(file = %path.display(), %error, "a records file cannot be read"),
            }
        }
        Ok(Self { dir: dir.to_owned(), kinds: Mutex::new(kinds), writing: Arc::default() })
    }

    fn kinds(&self) -> std::sync::MutexGuard<'_, Kinds> {
        self.kinds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `kind`'s records as they are now (beside the file, then
    /// renamed over it), off the async workers.
    async fn persist(&self, kind: &str) -> Result<(), InterpreterError> {
        let _writing = self.writing.lock().await;
        let bytes = {
            let kinds = self.kinds();
            let empty = BTreeMap::new();
            serde_json::to_vec(kinds.get(kind).unwrap_or(&empty)).map_err(|e| InterpreterError::Invalid(format!("a record: {e}")))?
        };
        let file = self.dir.join(format!("{kind}.json"));
        tokio::task::spawn_blocking(move || {
            let partial = file.with_extension("json.partial");
            std::fs::write(&partial, &bytes).and_then(|()| std::fs::rename(&partial, &file))
        })
        .await
        .map_err(|e| InterpreterError::Unfinished(e.to_string()))?
        .map_err(|e| InterpreterError::io("writing a records file", e))
    }
}

impl SharedRecords for LocalRecords {
    fn write<'a>(&'a self, kind: &'a str, id: &'a str, fields: Fields) -> RecordCall<'a, ()> {
        Box::pin(async move {
            self.kinds().entry(kind.to_owned()).or_default().entry(id.to_owned()).or_default().extend(fields);
            self.persist(kind).await
        })
    }

    fn read<'a>(&'a self, kind: &'a str, id: &'a str) -> RecordCall<'a, Option<Fields>> {
        Box::pin(async move { Ok(self.kinds().get(kind).and_then(|records| records.get(id)).cloned()) })
    }

    fn remove<'a>(&'a self, kind: &'a str, id: &'a str) -> RecordCall<'a, ()> {
        Box::pin(async move {
            let removed = self.kinds().get_mut(kind).and_then(|records| records.remove(id)).is_some();
            if removed { self.persist(kind).await } else { Ok(()) }
        })
    }

    fn list<'a>(&'a self, kind: &'a str) -> RecordCall<'a, Vec<(String, Fields)>> {
        Box::pin(async move { Ok(self.kinds().get(kind).map(|records| records.iter().map(|(id, f)| (id.clone(), f.clone())).collect()).unwrap_or_default()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[tokio::test]
    async fn records_outlive_the_process_and_writes_merge_fields() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let records = LocalRecords::open(dir.path()).expect("records open");
        records.write("snapshot", "a", fields(&[("x", "1"), ("y", "2")])).await.expect("written");
        records.write("snapshot", "a", fields(&[("y", "3")])).await.expect("written");
        records.write("snapshot", "b", fields(&[("x", "4")])).await.expect("written");
        records.remove("snapshot", "b").await.expect("removed");
        drop(records);
        let again = LocalRecords::open(dir.path()).expect("records open again");
        assert_eq!(again.read("snapshot", "a").await.expect("read"), Some(fields(&[("x", "1"), ("y", "3")])));
        assert_eq!(again.list("snapshot").await.expect("listed").len(), 1);
        assert_eq!(again.read("other", "a").await.expect("read"), None);
    }
}
