//! Forks: new sessions with a copy of a session's files and state, one
//! or many in one call, and the copies snapshots are made by.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anypath_sandbox::state_image::SharedState;
use anypath_wire::SessionInfo;
use futures_util::future::BoxFuture;

use super::sessions::{Sessions, info};
use crate::error::InterpreterError;
use crate::held::session::{Create, Session};
use crate::interpreter::Interpreter;
use crate::views::hibernation::ImageSource;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind};

impl Sessions<'_> {
    /// A new session `new_id` of the same tenant with a copy of `session_id`'s
    /// files and live state, so each can go its own way. The copy counts
    /// toward the new session's quota; the parent's open files are closed.
    pub fn fork<'f>(&'f self, tenant: &'f str, session_id: &'f str, new_id: &'f str) -> BoxFuture<'f, Result<SessionInfo, InterpreterError>> {
        Box::pin(self.copy_session(tenant, session_id, new_id, None))
    }

    /// [`Self::fork`] into each of `new_ids`, in order: the parent is
    /// locked and its state captured once, and every child shares that
    /// image. All or nothing: when one child cannot be made, those made
    /// before it are removed and the error is returned.
    pub fn fork_many<'f>(&'f self, tenant: &'f str, session_id: &'f str, new_ids: &'f [String]) -> BoxFuture<'f, Result<Vec<SessionInfo>, InterpreterError>> {
        Box::pin(self.copy_sessions(tenant, session_id, new_ids.to_vec(), None))
    }

    /// [`Self::fork`], the copy idle for `ttl` before it expires (`None`:
    /// as long as the parent). A snapshot is taken, and a session started
    /// from one, by this same copy.
    pub(crate) async fn copy_session(&self, tenant: &str, session_id: &str, new_id: &str, ttl: Option<Duration>) -> Result<SessionInfo, InterpreterError> {
        let mut made = self.copy_sessions(tenant, session_id, vec![new_id.to_owned()], ttl).await?;
        made.pop().ok_or_else(|| InterpreterError::Invalid("the copy made no session".into()))
    }

    /// [`Self::copy_session`] into each of `new_ids`, all or none.
    async fn copy_sessions(&self, tenant: &str, session_id: &str, new_ids: Vec<String>, ttl: Option<Duration>) -> Result<Vec<SessionInfo>, InterpreterError> {
        for new_id in &new_ids {
            names::session_id(new_id)?;
        }
        let interpreter = self.interpreter;
        let (owner, id, names) = (tenant.to_owned(), session_id.to_owned(), new_ids.clone());
        let parent = interpreter
            .off_workers(move |i| {
                let parent = i.sessions().get(&owner, &id, Create::No)?;
                if let Some(taken) = names.into_iter().find(|new| i.sessions().get(&owner, new, Create::No).is_ok()) {
                    return Err(InterpreterError::SessionExists(taken));
                }
                Ok(parent)
            })
            .await?;
        drop(parent);
        let (parent, mut live) = self.locked(tenant, session_id, Create::No).await?;
        // A parked parent's image is copied in the store (a link where the
        // store can make one), never read into memory here.
        let image = if parent.hibernated.load(Relaxed) && !live.is_live() {
            Carried::Stored
        } else {
            match live.share().await.map_err(|e| InterpreterError::Invalid(format!("the session's state cannot be copied: {e}")))? {
                Some(image) => {
                    // The parent now keeps the image for its next copy: the budget counts it.
                    interpreter.measure_memory(&parent, &mut live).await;
                    Carried::Image(image)
                }
                None => Carried::Nothing,
            }
        };
        let (owner, ttl) = (tenant.to_owned(), ttl.unwrap_or(parent.ttl));
        let from = parent.clone();
        let children = interpreter
            .off_workers(move |i| {
                let mut children = Vec::with_capacity(new_ids.len());
                for new in &new_ids {
                    match copy_one(i, &owner, &from, new, ttl, &image) {
                        Ok(child) => children.push(child),
                        Err(error) => {
                            for child in &children {
                                i.sessions().forget(child);
                            }
                            return Err(error);
                        }
                    }
                }
                Ok(children)
            })
            .await?;
        drop(live);
        Ok(children.iter().map(|child| info(child)).collect())
    }

}

/// The names of one fork call's `count` children: `{prefix}-1` on, the
/// prefix made up (`fork-` and 12 random hex digits) when none is given.
/// A count outside 1 to [`anypath_wire::MAX_FORKS_PER_CALL`] is refused.
pub fn child_names(prefix: Option<&str>, count: u32) -> Result<Vec<String>, InterpreterError> {
    if !(1..=anypath_wire::MAX_FORKS_PER_CALL).contains(&count) {
        return Err(InterpreterError::Invalid(format!("count must be 1 to {}, not {count}", anypath_wire::MAX_FORKS_PER_CALL)));
    }
    let prefix = prefix.map_or_else(|| format!("fork-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]), str::to_owned);
    Ok((1..=count).map(|index| format!("{prefix}-{index}")).collect())
}

/// One child of a copy: `new` made like `from` (its datasets, a copy of
/// its files, the state `image` carries), or nothing left of it.
fn copy_one(i: &Arc<Interpreter>, owner: &str, from: &Arc<Session>, new: &str, ttl: Duration, image: &Carried) -> Result<Arc<Session>, InterpreterError> {
    let child = i.sessions().get(owner, new, Create::like(from, ttl))?;
    let attached = from.attached.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let shown = i.dataset_store.build_view(&i.artifact_store, owner, &child.datasets_view, &attached);
    let copied = shown.and_then(|shown| {
        *child.attached.lock().unwrap_or_else(|p| p.into_inner()) = shown;
        copy_tree(from.files.dir(), child.files.dir())
    });
    let copied = copied.and_then(|()| match image {
        Carried::Image(state) => {
            let image = state.image();
            // The same state forked again: the image the parent's home keeps
            // for its forks is shared (a link) rather than written once more.
            let source = from.fork_source.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let shared = source
                .filter(|kept| std::ptr::addr_eq(kept.as_ptr(), Arc::as_ptr(image)) && kept.strong_count() > 0)
                .is_some_and(|_| i.hibernation().share_image(ImageSource::ForkSource(from), &child, image.len() as u64).is_ok());
            let kept = if shared { Ok(()) } else { i.hibernation().save_image(&child, image) };
            if kept.is_ok() {
                if !shared {
                    let kept_for_forks = child.store.keep_fork_source(owner, &from.id, &child.id).unwrap_or(false);
                    *from.fork_source.lock().unwrap_or_else(|p| p.into_inner()) = kept_for_forks.then(|| Arc::downgrade(image));
                }
                // The child's first run maps the state rather than restoring it.
                *child.shared_state.lock().unwrap_or_else(|p| p.into_inner()) = Some(state.clone());
            }
            kept
        }
        Carried::Stored => {
            let copied = i.hibernation().copy_image(from, &child);
            // A parked parent made by a fork or a snapshot in this process
            // still has its state shared: the child maps it too.
            let shared = from.shared_state.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if copied.is_ok() {
                *child.shared_state.lock().unwrap_or_else(|p| p.into_inner()) = shared;
            }
            copied
        }
        Carried::Nothing => Ok(()),
    });
    if !matches!(image, Carried::Nothing) {
        child.hibernated.store(true, Relaxed);
        child.had_state.store(true, Relaxed);
    }
    match copied.and_then(|()| child.write_meta()) {
        Ok(()) => Ok(child),
        Err(error) => {
            i.sessions().forget(&child);
            Err(error)
        }
    }
}

/// The state a copy of a session takes along.
enum Carried {
    /// None: the parent never ran, or its state was lost.
    Nothing,
    /// The live instance's state, captured and shared (or its last
    /// capture, when it has run nothing since).
    Image(Arc<SharedState>),
    /// The parent's stored image (it is parked).
    Stored,
}

/// Copies the files and directories under `from` into `to` (a copy-on-write
/// clone where the filesystem offers one: `std::fs::copy` uses
/// `copy_file_range`).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> Result<(), InterpreterError> {
    let io = |e| InterpreterError::io("copying a session's files", e);
    for entry in std::fs::read_dir(from).map_err(io)? {
        let entry = entry.map_err(io)?;
        let kind = entry.file_type().map_err(io)?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir_all(&target).map_err(io)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(io)?;
        }
    }
    Ok(())
}

/// A new session with a copy of the session's files and state.
#[derive(Debug)]
pub struct ForkSession {
    /// The session to copy.
    pub session_id: String,
    /// The new session's name.
    pub new_session_id: String,
}

impl Operation for ForkSession {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Fork).session(&self.session_id).subject(&self.new_session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        Box::pin(async move {
            interpreter.sessions().fork(&caller.tenant, &self.session_id, &self.new_session_id).await
        })
    }
}

/// Several new sessions, each a copy of the session's files and state:
/// all of them or none.
#[derive(Debug)]
pub struct ForkSessions {
    /// The session to copy.
    pub session_id: String,
    /// The new sessions' names, none of them in use.
    pub new_session_ids: Vec<String>,
}

impl Operation for ForkSessions {
    type Output = Vec<SessionInfo>;

    fn describe(&self) -> Described {
        let first = self.new_session_ids.first().map_or("", String::as_str);
        Described::new(OperationKind::Fork).session(&self.session_id).subject(first)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Vec<SessionInfo>, InterpreterError>> {
        Box::pin(async move {
            interpreter.sessions().fork_many(&caller.tenant, &self.session_id, &self.new_session_ids).await
        })
    }
}

