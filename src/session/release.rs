//! Deleting our nodes: waited for up to a bound, then retried in the background until the node
//! is gone or the session has ended.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use log::warn;

use crate::error::{Error, Result};
use crate::rt::relay::io_log;
use crate::rt::runtime::block_on;
use crate::wire as zk;

use super::errors::outcome_unknown;
use super::op::Op;
use super::retry::retry_pause_async;
use super::{Liveness, Session};

impl Session {
    /// Deletes our node `path`: waits for the reply up to `wait`, then, if the connection is
    /// down or slow, keeps retrying in the background until the node is gone or the session
    /// has ended. `Ok(true)` if the node was deleted, `Ok(false)` if it was already gone.
    pub(crate) fn delete_node(&self, path: &str, wait: Duration) -> Result<bool> {
        if self.liveness() == Liveness::Ended {
            return Err(self.ended_error());
        }
        let zk = self.zk()?;
        let target = path.to_owned();
        let op: Op<()> = Box::pin(async move { zk.delete(&target, None).await });
        let deadline = if self.liveness() == Liveness::Connected {
            Instant::now() + wait
        } else {
            Instant::now()
        };
        let sent = Instant::now();
        let outcome = block_on(op, Some(deadline));
        if let Ok(answer) = &outcome {
            self.answered(sent, answer);
        }
        let pending = match outcome {
            Ok(Ok(())) => return Ok(true),
            Ok(Err(zk::Error::NoNode)) => return Ok(false),
            Ok(Err(err)) if !outcome_unknown(&err) => return Err(Error::from_zk(err, path)),
            Ok(Err(_)) => None,
            Err(pending) => Some(pending),
        };
        warn!(
            "delete of {path} (session {:#x}) not confirmed; retrying in the background",
            self.id
        );
        let Ok(zk) = self.zk() else {
            return Err(Error::Closed); // The node goes with the session.
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
        Err(Error::ConnectionLoss)
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
        let token = self.releases.begin();
        let handle = self.handle.spawn(async move {
            task.await;
            drop(token);
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
pub(super) async fn delete_until_gone(zk: &zk::Client, path: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.delete(path, None).await {
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
pub(super) async fn sweep(zk: &zk::Client, lock_path: &str, prefix: &str) {
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
            Err(_) => return,
        }
    }
}
