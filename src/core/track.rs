//! What zklock reports about each held lock: how long it was held, and when it was lost. Log
//! lines and metrics (see `metrics.rs`) both come from here; the acquisition itself is measured
//! by the recipes' front end (`recipes/acquisition.rs`), which starts a [`Track`] for what it
//! took.
//!
//! A [`Track`] is shared by the nodes of one acquisition (one for a mutex, several for a
//! multi-lock or a permit of several nodes). It records the hold time when the last of them is
//! released, and counts a loss at most once.
//!
//! **When a loss is counted.** zklock learns that a held lock is lost only when it looks: when
//! a call on the guard (`state`, `is_held`, `lease_remaining`, `wait_lost`, ...) finds it
//! [`LockState::Lost`](super::standing::LockState::Lost), or
//! [`LockState::Suspended`](super::standing::LockState::Suspended) because the lease ran out
//! while the connection looked alive (cause `lease`: another process may have the lock by now),
//! or when releasing finds the node gone or the session ended. The first of these counts the
//! loss, with its cause, and logs a warning; later ones for the same acquisition do not. A
//! guard that is only dropped is still counted, at its release. A lock merely `Suspended` by a
//! lost connection is not counted: it comes back as `Held` if the session survives, and is
//! counted as `expired` if not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::debug;

use crate::error::{Error, Result};
use crate::metrics::{self, LossCause, Recipe};
use crate::rt::relay::io_log;

use super::seam::HoldingSession;
use super::standing::{ended, Loss, Standing};

/// The log target of the lines about acquisitions, holds and losses, as the operating docs name
/// it (it was this code's module before the core had a folder of its own).
pub(crate) const LOG_TARGET: &str = "zklock::observe";

/// Follows the nodes of one acquisition while they are held; untracked (`default`) for nodes
/// held only on the way (a semaphore's gate, the members of a failed multi-lock).
#[derive(Clone, Default)]
pub(crate) struct Track(Option<Arc<Tracked>>);

struct Tracked {
    /// The hold's id in the held-locks gauges.
    hold: u64,
    recipe: Recipe,
    path: String,
    path_label: bool,
    /// The node paths, for the log.
    nodes: String,
    session: i64,
    acquired: Instant,
    /// The loss has been counted.
    lost: AtomicBool,
}

impl Track {
    /// Starts following a hold, from now, of `recipe` on `path` (`path_label`: the metrics carry
    /// the path), whose nodes are `nodes` (for the log) on `session`.
    pub(crate) fn start(
        recipe: Recipe,
        path: String,
        path_label: bool,
        nodes: String,
        session: i64,
    ) -> Track {
        let hold = metrics::hold_started(recipe, path_label.then_some(path.as_str()));
        Track(Some(Arc::new(Tracked {
            hold,
            recipe,
            path,
            path_label,
            nodes,
            session,
            acquired: Instant::now(),
            lost: AtomicBool::new(false),
        })))
    }

    /// A call on the guard found the lock where `standing` says. Cheap while held.
    pub(crate) fn observed(&self, standing: Standing) {
        let Some(tracked) = &self.0 else { return };
        if tracked.lost.load(Ordering::Relaxed) {
            return;
        }
        let cause = match standing {
            Standing::Held(_) => return,
            Standing::Suspended { connected: true } => LossCause::Lease,
            Standing::Suspended { connected: false } => return, // Not (yet) a loss.
            Standing::Lost(loss) => cause(loss),
        };
        tracked.lost(cause);
    }

    /// Releasing our node ended with `deleted` (as `Session::delete_node` reports it), on
    /// `session`.
    pub(crate) fn released(&self, deleted: &Result<bool>, session: &dyn HoldingSession) {
        let Some(tracked) = &self.0 else { return };
        match deleted {
            Ok(false) => tracked.lost(LossCause::Deleted),
            Err(Error::SessionExpired | Error::Closed | Error::Forked) => {
                tracked.lost(cause(ended(&session.ended_error())))
            }
            _ => {}
        }
    }
}

/// The `cause` label of a loss.
fn cause(loss: Loss) -> LossCause {
    match loss {
        Loss::Deleted => LossCause::Deleted,
        Loss::Expired => LossCause::Expired,
        Loss::Closed => LossCause::Closed,
    }
}

impl Tracked {
    fn lost(&self, cause: LossCause) {
        if self.lost.swap(true, Ordering::Relaxed) {
            return;
        }
        metrics::lost(cause, self.path_label.then_some(self.path.as_str()));
        // Through the relay: `state()` promises never to block, and a logger might.
        io_log!(
            target: LOG_TARGET,
            Warn,
            "lock {} lost ({}): node {}, session {:#x}, held for {:?}",
            self.path,
            cause.label(),
            self.nodes,
            self.session,
            self.acquired.elapsed()
        );
    }
}

impl Drop for Tracked {
    /// The last node of the acquisition was released (dropping follows releasing at once).
    fn drop(&mut self) {
        let held: Duration = self.acquired.elapsed();
        let label = self.path_label.then_some(self.path.as_str());
        metrics::hold(self.recipe, label, held);
        metrics::hold_ended(self.hold, self.recipe, label);
        debug!(
            target: LOG_TARGET,
            "released {} ({} on {}, session {:#x}) after holding {held:?}",
            self.nodes,
            self.recipe.label(),
            self.path,
            self.session
        );
    }
}
