//! A live instance's state outside it: captured (for a fork, a snapshot, a
//! hand-over), hibernated into an image, and taken back by the next start,
//! restored from an image or mapped from a state shared with other
//! instances.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{LiveInstance, start};
use crate::seam::StartFor;
use crate::state_image::shared::MappedState;
use crate::state_image::{SharedState, StateError};

/// A state the next start takes.
pub(super) enum Saved {
    /// An image, restored into the new instance.
    Image(Vec<u8>),
    /// A state shared with other instances: its frozen memory mapped where
    /// the runtime can, else its image restored.
    Shared(Arc<SharedState>),
}

impl Saved {
    fn into_image(self) -> Vec<u8> {
        match self {
            Self::Image(image) => image,
            Self::Shared(state) => state.image().to_vec(),
        }
    }

}

impl LiveInstance {
    /// The next run restores `image` (captured from an instance of the same
    /// runtime) instead of starting fresh. Any live instance is dropped.
    pub fn with_saved_state(mut self, image: Vec<u8>) -> Self {
        self.resume_with(image);
        self
    }

    /// As [`Self::with_saved_state`], in place.
    pub fn resume_with(&mut self, image: Vec<u8>) {
        self.resume_saved(Saved::Image(image));
    }

    /// As [`Self::resume_with`], from a state shared with other instances
    /// (a fork's, a snapshot's): the next start maps its frozen memory
    /// where the runtime can, sharing its pages, and restores its image
    /// where it cannot.
    pub fn resume_shared(&mut self, state: Arc<SharedState>) {
        self.resume_saved(Saved::Shared(state));
    }

    fn resume_saved(&mut self, saved: Saved) {
        self.instance = None;
        self.adopted = false;
        self.saved = Some(saved);
        self.away = false;
    }

    /// Whether a saved image waits for the next run.
    pub fn is_hibernated(&self) -> bool {
        self.instance.is_none() && self.saved.is_some()
    }

    /// The state image of the live instance, which keeps running (a fork's
    /// copy); the saved image when hibernated; `None` without state. An
    /// instance that has run nothing since its last capture gives that
    /// image again: a hundred forks of one state capture it once.
    pub fn capture(&mut self) -> BoxFuture<'_, Result<Option<Arc<[u8]>>, StateError>> {
        Box::pin(async move { Ok(self.captured_state(false).await?.map(|state| state.image().clone())) })
    }

    /// As [`Self::capture`], the state also frozen where the runtime can, for
    /// forks and snapshots to map ([`Self::resume_shared`]): every instance
    /// started from it shares its pages. Made once per state: an instance
    /// that has run nothing since gives the same one again.
    pub fn share(&mut self) -> BoxFuture<'_, Result<Option<Arc<SharedState>>, StateError>> {
        Box::pin(self.captured_state(true))
    }

    /// The state [`Self::capture`] and [`Self::share`] give: the last
    /// capture while the instance has run nothing since (when `freeze`, only
    /// one frozen already, where the runtime freezes), else a new one.
    async fn captured_state(&mut self, freeze: bool) -> Result<Option<Arc<SharedState>>, StateError> {
        if self.adopted {
            return Ok(None);
        }
        let needs_mapping = freeze && self.runtime.maps_shared_states();
        if let Some(state) = self.instance.as_ref().and_then(|instance| instance.guest.captured.clone()).filter(|state| state.is_mapped() || !needs_mapping) {
            return Ok(Some(state));
        }
        let runtime = self.runtime.clone();
        let closed = self.park().await?;
        match (self.instance.as_mut(), &self.saved) {
            (Some(instance), _) => {
                let state = match freeze {
                    true => runtime.share(instance, closed).await?,
                    false => SharedState::image_only(runtime.capture(instance, closed).await?.into()),
                };
                let state = Arc::new(state);
                instance.guest.captured = Some(state.clone());
                Ok(Some(state))
            }
            (None, Some(Saved::Image(saved))) => Ok(Some(Arc::new(SharedState::image_only(saved.as_slice().into())))),
            (None, Some(Saved::Shared(state))) => Ok(Some(state.clone())),
            (None, None) => Ok(None),
        }
    }

    /// The state image of the live instance, which keeps running as it is:
    /// `None` without a live instance with state, or while the code holds a
    /// file open (capturing would close it under the running session).
    pub fn checkpoint(&mut self) -> BoxFuture<'_, Result<Option<Vec<u8>>, StateError>> {
        Box::pin(async move {
            if self.adopted {
                return Ok(None);
            }
            let runtime = self.runtime.clone();
            match self.instance.as_mut() {
                Some(instance) if instance.store.data().open_files == 0 => runtime.capture(instance, Vec::new()).await.map(Some),
                _ => Ok(None),
            }
        })
    }

    /// Captures the live instance's state and drops the instance, freeing
    /// its memory: the image's bytes, for the caller to keep, and to hand
    /// back with [`Self::resume_with`] (a saved image not restored yet is
    /// handed out as it is). `None` when no instance is live and no image
    /// waits. When capturing fails the instance is kept.
    ///
    /// From then on the state is the caller's: until it comes back, the
    /// next run reports it lost (`state_reset`), so an image that never
    /// reached its keeper is never mistaken for a session without state.
    pub fn hibernate(&mut self) -> BoxFuture<'_, Result<Option<Vec<u8>>, StateError>> {
        Box::pin(async move {
            if self.adopted {
                // Started ahead and never run: nothing of its own to keep, only memory to free.
                self.instance = None;
                self.adopted = false;
            }
            if self.instance.is_none() {
                let saved = self.saved.take();
                self.away |= saved.is_some();
                return Ok(saved.map(Saved::into_image));
            }
            let closed = self.park().await?;
            let Some(instance) = self.instance.as_mut() else { return Ok(None) };
            let runtime = self.runtime.clone();
            let image = runtime.capture(instance, closed).await?;
            self.instance = None;
            self.away = true;
            Ok(Some(image))
        })
    }

    /// Starts an instance and gives it the `saved` state: the files closed
    /// when it was captured. On failure no instance is left: the run starts
    /// a fresh one.
    pub(super) async fn resume(&mut self, saved: Saved) -> Result<Vec<String>, StateError> {
        let image = match saved {
            Saved::Shared(state) => match state.mapped().filter(|_| self.runtime.maps_shared_states()) {
                Some(mapped) => match self.resume_mapped(mapped).await {
                    Ok(closed) => return Ok(closed),
                    Err(error) => {
                        // The image holds the same state: nothing is lost.
                        tracing::warn!(%error, "a shared state could not be mapped; its image is restored instead");
                        state.image().to_vec()
                    }
                },
                None => state.image().to_vec(),
            },
            Saved::Image(image) => image,
        };
        self.restore_image(image).await
    }

    /// Starts the instance of a new session (no state of its own yet) by
    /// mapping its runtime's template, when the runtime starts from one:
    /// the engine its first cell would make is already there. Leaves no
    /// instance when there is no template or it could not be mapped: the
    /// caller then starts one as usual.
    pub(super) async fn start_from_template(&mut self) {
        let shape = crate::template::Shape { layout: self.layout, datasets: self.datasets.is_some(), wheelhouse: self.wheelhouse.is_some() };
        let Some(template) = self.runtime.template(shape).await else { return };
        let Some(mapped) = template.mapped() else { return };
        if let Err(error) = self.resume_mapped(mapped).await {
            tracing::warn!(%error, "a new session could not map its runtime's template; it starts its own engine");
        }
    }

    /// Starts an instance and maps it onto a shared state's frozen memory.
    /// On failure no instance is left.
    async fn resume_mapped(&mut self, state: &Arc<MappedState>) -> Result<Vec<String>, StateError> {
        let quota = self.quota.clone();
        self.directory_changed();
        let instance = start(self.runtime.clone(), self.dir.clone(), self.layout, (self.datasets.clone(), self.wheelhouse.clone()), quota, self.limits.memory_bytes, StartFor::Restore)
            .await
            .map_err(|e| StateError::Start(e.to_string()))?;
        self.instance = Some(instance);
        // As a restore: the host handles first, in the saved instance's order.
        let prologue = self.take_host_handles().await;
        let runtime = self.runtime.clone();
        let mapped = match (prologue, self.instance.as_mut()) {
            (Ok(()), Some(instance)) => runtime.map_shared(instance, state).await,
            (Err(error), _) => Err(error),
            (Ok(()), None) => Err(StateError::Unsupported("no instance after the first run".into())),
        };
        if mapped.is_err() {
            self.instance = None;
        }
        mapped
    }

    /// Starts an instance and restores `image` into it: the files closed
    /// when it was captured. On failure no instance is left.
    async fn restore_image(&mut self, image: Vec<u8>) -> Result<Vec<String>, StateError> {
        // Checked and decompressed on the blocking pool while the instance starts.
        let plan = crate::state_image::image::plan(&image);
        let decode = self.runtime.decoder();
        let decoding = tokio::task::spawn_blocking(move || decode(&image));
        let quota = self.quota.clone();
        self.directory_changed();
        let instance = start(self.runtime.clone(), self.dir.clone(), self.layout, (self.datasets.clone(), self.wheelhouse.clone()), quota, self.limits.memory_bytes, StartFor::Restore)
            .await
            .map_err(|e| StateError::Start(e.to_string()))?;
        self.instance = Some(instance);
        // Unless the image's instances hold it from the start, a first call
        // takes the host handles every session holds (its stdout, its
        // preopened directory) in the order the saved instance took them;
        // the restored memory refers to them by number.
        let mut prologue = self.take_host_handles().await;
        // Where the image's chunks go is known before the image is checked:
        // their pages are made ready while it is still being decoded.
        if let (Ok(()), Ok(plan), Some(instance)) = (&prologue, &plan, self.instance.as_mut()) {
            prologue = self.runtime.prepare(instance, plan).await;
        }
        let decoded = decoding.await.map_err(|e| StateError::Unsupported(format!("decoding the image: {e}")));
        let restored = match (prologue, decoded) {
            (Ok(_), Ok(Ok(image))) => match self.instance.as_mut() {
                Some(instance) => self.runtime.restore(instance, image).await,
                None => Err(StateError::Unsupported("no instance after the first run".into())),
            },
            (Err(e), _) | (_, Err(e)) | (_, Ok(Err(e))) => Err(e),
        };
        if restored.is_err() {
            self.instance = None;
        }
        restored
    }
}
