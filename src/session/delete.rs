//! Deleting our nodes: waited for up to a bound, then retried in the background until the node
//! is gone or the session has ended.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use log::warn;

use crate::error::{Error, Result};
use crate::rt::relay::io_log;
use crate::wire as zk;

use super::errors::outcome_unknown;
use super::op::Op;
use super::retry::retry_pause_async;
use super::{until, Liveness, Session};

impl Session {
    /// Deletes our node `path`: waits for the reply up to `wait`, then, if the connection is
    /// down or slow, keeps retrying in the background until the node is gone or the session
    /// has ended. `Ok(true)` if the node was deleted, `Ok(false)` if it was already gone.
    /// Dropped before the delete is
    /// answered, it goes on in the background.
    pub(crate) async fn delete_node_async(&self, path: &str, wait: Duration) -> Result<bool> {
        if self.liveness() == Liveness::Ended {
            return Err(self.ended_error());
        }
        let zk = self.zk()?;
        let target = path.to_owned();
        let op: Op<()> = Box::pin(async move { zk.delete_own(&target).await });
        let deadline = if self.liveness() == Liveness::Connected {
            Instant::now() + wait
        } else {
            Instant::now()
        };
        let mut pending = PendingDelete {
            session: self,
            path,
            op: Some(op),
        };
        let sent = Instant::now();
        let outcome = match pending.op.as_mut() {
            Some(op) => until(op, Some(deadline)).await.ok(),
            None => None,
        };
        if let Some(answer) = &outcome {
            self.answered(sent, answer);
        }
        match outcome {
            Some(Ok(())) => {
                pending.op = None;
                return Ok(true);
            }
            Some(Err(zk::Error::NoNode)) => {
                pending.op = None;
                return Ok(false);
            }
            Some(Err(err)) if !outcome_unknown(&err) => {
                pending.op = None;
                return Err(self.error(err, path));
            }
            Some(Err(_)) => pending.op = None,
            None => {}
        }
        warn!(
            "delete of {path} (session {:#x}) not confirmed; retrying in the background",
            self.id
        );
        if self.zk().is_err() {
            return Err(Error::Closed); // The node goes with the session.
        }
        // Whether the delete went out or failed unsent, retried until the node is gone.
        let sent = pending.op.take();
        self.delete_in_background(path, sent);
        Err(Error::connection_loss())
    }

    /// Deletes `path` in the background after `pending` (a delete already sent, if any)
    /// ends without an answer: until the node is gone or the session has ended.
    fn delete_in_background(&self, path: &str, pending: Option<Op<()>>) {
        let Ok(zk) = self.zk() else {
            return; // Closed: the node goes with the session.
        };
        let target = path.to_owned();
        self.spawn_release(async move {
            if let Some(pending) = pending {
                match pending.await {
                    Ok(()) | Err(zk::Error::NoNode) => return,
                    Err(err) if !outcome_unknown(&err) => return,
                    Err(_) => {}
                }
            }
            delete_until_gone(&zk, &target).await;
        });
    }

    /// Withdraws our node `path` without waiting: deleted in the background until it is gone
    /// or the session has ended. `done` is dropped once that is settled.
    pub(crate) fn withdraw_in_background(&self, path: &str, done: impl Send + 'static) {
        let Ok(zk) = self.zk() else {
            return; // Closed: the node goes with the session.
        };
        let target = path.to_owned();
        self.spawn_release(async move {
            delete_until_gone(&zk, &target).await;
            drop(done);
        });
    }

    /// Deletes every child of `lock_path` whose name starts with `prefix`, in the background,
    /// once the connection allows (used after a create whose outcome is unknown was abandoned).
    pub(crate) fn sweep_in_background(&self, lock_path: &str, prefix: &str) {
        let Ok(zk) = self.zk() else {
            return; // Closed: the nodes go with the session.
        };
        let (lock_path, prefix) = (lock_path.to_owned(), prefix.to_owned());
        self.spawn_release(async move { sweep(&zk, &lock_path, &prefix).await });
    }

    /// Runs a background release on the runtime: it outlives this `Session` value (it ends
    /// with the node gone or the session), and is aborted only when the session is closed.
    pub(super) fn spawn_release(
        &self,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let pending = self.releases.begin();
        let handle = self.handle.spawn(async move {
            task.await;
            drop(pending);
        });
        let mut releases = self.release_tasks.lock();
        releases.retain(|t| !t.is_finished());
        releases.push(handle.abort_handle());
        drop(releases);
        if self.closed.load(Ordering::SeqCst) {
            // Closed while we spawned it: close may have aborted the others already, and
            // this one must not keep the session open.
            handle.abort();
        }
    }
}

/// Retries `delete(path)` until it succeeds, the node is gone, or the session ends.
pub(super) async fn delete_until_gone(zk: &zk::Transport, path: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.delete_own(path).await {
            Ok(()) => {
                io_log!(Debug, "deleted {path} in the background");
                return;
            }
            Err(zk::Error::NoNode) => return,
            Err(err) if outcome_unknown(&err) => {
                if !retry_pause_async(&mut state).await {
                    return;
                }
            }
            Err(err) => {
                // Expired or closed: the server removes the ephemeral node itself.
                io_log!(Debug, "background delete of {path} stopped: {err}");
                return;
            }
        }
    }
}

/// Deletes the children of `lock_path` starting with `prefix`, retrying across reconnects.
pub(super) async fn sweep(zk: &zk::Transport, lock_path: &str, prefix: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.list_children(lock_path).await {
            Ok(children) => {
                for child in children.iter().filter(|c| c.starts_with(prefix)) {
                    io_log!(
                        Warn,
                        "deleting {lock_path}/{child}, left by an abandoned create"
                    );
                    delete_until_gone(zk, &format!("{lock_path}/{child}")).await;
                }
                return;
            }
            Err(err) if outcome_unknown(&err) => {
                if !retry_pause_async(&mut state).await {
                    return;
                }
            }
            Err(err @ zk::Error::ReplyTooLarge { .. }) => {
                // The node, if the create made one, stays until the session ends.
                io_log!(
                    Warn,
                    "cannot look for a node {lock_path}/{prefix}… left by an abandoned create: \
                     the listing is {err}"
                );
                return;
            }
            Err(_) => return,
        }
    }
}

/// A delete of our node in flight: dropped unanswered, it goes on in the background.
struct PendingDelete<'a> {
    session: &'a Session,
    path: &'a str,
    op: Option<Op<()>>,
}

impl Drop for PendingDelete<'_> {
    fn drop(&mut self) {
        if let Some(op) = self.op.take() {
            self.session.delete_in_background(self.path, Some(op));
        }
    }
}
