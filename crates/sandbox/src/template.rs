//! Templates: a runtime whose instances spend their first cell making an
//! engine (QuickJS and its globals) has that done once per shape of
//! instance, in a scratch instance whose state is then frozen; a new
//! session maps that frozen state copy-on-write, as a fork's child maps its
//! parent's, instead of making the engine again. (A runtime opts in with
//! [`crate::seam::RuntimeImage::starts_from_template`].)
//!
//! A state refers to its instance's host handles by number, and an
//! instance's preopened directories depend on its layout and on whether it
//! sees datasets and a wheelhouse: a template is made for each of those
//! shapes, on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

use crate::layout::FilesLayout;
use crate::limits::LimitOverrides;
use crate::live::CellRequest;
use crate::session::SessionRuntime;
use crate::state_image::{SharedState, StateError};

/// The host's request that the cell code only make its engine (reserved,
/// with every `ANYPATH_STATE_` name, from users' runs).
const WARM_MARK: &str = "ANYPATH_STATE_WARM";

/// Whether a run is the one that makes a template (which must not wait for
/// a template itself).
pub(crate) fn is_warming(env: &[(String, String)]) -> bool {
    env.iter().any(|(key, _)| key == WARM_MARK)
}

/// What decides an instance's host handles: its layout, and whether it sees
/// datasets and a wheelhouse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    pub(crate) layout: FilesLayout,
    pub(crate) datasets: bool,
    pub(crate) wheelhouse: bool,
}

/// A runtime's templates, one per [`Shape`], each made once (`None` when
/// making it failed: those sessions start as they would without one).
#[derive(Default)]
pub(crate) struct Templates {
    made: Mutex<HashMap<Shape, Arc<OnceCell<Option<Arc<SharedState>>>>>>,
}

impl Templates {
    /// The template of `shape` for `runtime`, made now if it is the first asked for.
    pub(crate) async fn get(&self, runtime: &SessionRuntime, shape: Shape) -> Option<Arc<SharedState>> {
        let cell = self.made.lock().unwrap_or_else(PoisonError::into_inner).entry(shape).or_default().clone();
        cell.get_or_init(|| async {
            match make(runtime, shape).await {
                Ok(state) => Some(state),
                Err(error) => {
                    tracing::warn!(%error, runtime = %runtime.runtime(), "no template for new sessions: they start their engine themselves");
                    None
                }
            }
        })
        .await
        .clone()
    }
}

/// Why a template could not be made.
#[derive(Debug, thiserror::Error)]
enum TemplateError {
    #[error("preparing its scratch directory: {0}")]
    Scratch(#[from] std::io::Error),
    #[error("making the engine failed: {0}")]
    Warm(String),
    #[error("freezing its state: {0}")]
    State(#[from] StateError),
    #[error("its state could not be frozen for mapping")]
    NotMapped,
}

/// A scratch instance of `shape`: its engine made, its state frozen.
async fn make(runtime: &SessionRuntime, shape: Shape) -> Result<Arc<SharedState>, TemplateError> {
    let scratch = tempfile::Builder::new().prefix("anypath-template-").tempdir()?;
    let (dir, datasets, wheelhouse) = (scratch.path().join("tree"), scratch.path().join("data"), scratch.path().join("wheelhouse"));
    for folder in [&dir, &datasets, &wheelhouse] {
        std::fs::create_dir_all(folder)?;
    }
    shape.layout.prepare(&dir)?;
    let mut instance = runtime.live_instance(Some(dir), &LimitOverrides::default()).with_layout(shape.layout);
    if shape.datasets {
        instance = instance.with_datasets(datasets);
    }
    if shape.wheelhouse {
        instance = instance.with_wheelhouse(wheelhouse);
    }
    let warmed = instance.run(CellRequest { env: vec![(WARM_MARK.to_owned(), "1".to_owned())], ..CellRequest::default() }).await;
    if let Some(error) = warmed.error {
        return Err(TemplateError::Warm(error.to_string()));
    }
    let state = instance.share().await?.ok_or(TemplateError::NotMapped)?;
    if state.mapped().is_none() {
        return Err(TemplateError::NotMapped);
    }
    Ok(state)
}
