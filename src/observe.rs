//! What zklock reports about each acquisition and each held lock: how long the caller waited
//! and how it ended, how long the lock was held, and when it was lost. Log lines and metrics
//! (see `metrics.rs`) both come from here.
//!
//! An acquisition is measured by the recipe's front end, around the whole call
//! ([`Acquisition`]). What it took is then followed by a [`Track`] shared by its nodes (one
//! for a mutex, several for a multi-lock or a permit of several leases), which records the hold
//! time when the last of them is released, and counts a loss at most once.
//!
//! **When a loss is counted.** zklock learns that a held lock is lost only when it looks: when
//! a call on the guard (`state`, `is_held`, `lease_remaining`, `wait_lost`, ...) finds it
//! [`LockState::Lost`], or [`LockState::Suspended`] because the lease ran out while the
//! connection looked alive (cause `lease`: another process may have the lock by now), or when
//! releasing finds the node gone or the session ended. The first of these counts the loss,
//! with its cause, and logs a warning; later ones for the same acquisition do not. A guard
//! that is only dropped is still counted, at its release. A lock merely `Suspended` by a lost
//! connection is not counted: it comes back as `Held` if the session survives, and is counted
//! as `expired` if not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::debug;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::metrics::{self, LossCause, Outcome, Recipe};
use crate::recipe::{Held, Kind, LockState};
use crate::rt::relay::io_log;
use crate::session::{Liveness, Session};
use crate::wait::{Attempt, Patience};
use crate::znode::layout::{LATCH_NAME, READ_NAME, WRITE_NAME};

/// The recipe a queue's node kind belongs to.
pub(crate) fn recipe_of(kind: &Kind) -> Recipe {
    match kind.names[kind.ours].0 {
        READ_NAME => Recipe::RwLockRead,
        WRITE_NAME => Recipe::RwLockWrite,
        LATCH_NAME => Recipe::Election,
        _ => Recipe::Mutex,
    }
}

/// One acquisition call, measured from its start.
pub(crate) struct Acquisition {
    started: Instant,
    recipe: Recipe,
    path: String,
    path_label: bool,
    _waiting: Waiting,
}

/// Counts an acquisition call in the `waiting` gauge for as long as it lives, however the call
/// ends (a panic in a recorder included).
struct Waiting {
    recipe: Recipe,
    path: Option<String>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::waiting(self.recipe, self.path.as_deref(), -1.0);
    }
}

impl Acquisition {
    /// Starts measuring an acquisition of `recipe` on `path` (for a multi-lock, its paths).
    pub(crate) fn start(client: &Client, recipe: Recipe, path: &str) -> Acquisition {
        let path_label = client.observe().path_label;
        let label = path_label.then(|| path.to_owned());
        metrics::waiting(recipe, label.as_deref(), 1.0);
        Acquisition {
            started: Instant::now(),
            recipe,
            path: path.to_owned(),
            path_label,
            _waiting: Waiting {
                recipe,
                path: label,
            },
        }
    }

    /// Records how the call ended and, when it acquired, starts following what it took
    /// (`nodes` picks the nodes out of the guard).
    pub(crate) fn finish<G>(
        self,
        attempt: &Attempt,
        mut outcome: Result<Option<G>>,
        nodes: impl FnOnce(&mut G) -> Vec<&mut Held>,
    ) -> Result<Option<G>> {
        let waited = self.started.elapsed();
        let label = self.path_label.then_some(self.path.as_str());
        let (recipe, path) = (self.recipe.label(), &self.path);
        let ended = match &outcome {
            Ok(Some(_)) => Outcome::Acquired,
            Ok(None) if matches!(attempt.patience, Patience::DontWait) => Outcome::Busy,
            Ok(None) => Outcome::Timeout,
            Err(Error::Cancelled | Error::Closed) => Outcome::Cancelled,
            Err(_) => Outcome::Error,
        };
        metrics::acquisition(self.recipe, ended, label, waited);
        match &mut outcome {
            Ok(Some(guard)) => {
                let mut nodes = nodes(guard);
                let names: Vec<&str> = nodes.iter().map(|n| n.node_path()).collect();
                let names = names.join(", ");
                let (session, token) = nodes
                    .first()
                    .map_or((0, 0), |n| (n.session_id(), n.fencing_token()));
                debug!("acquired {names} ({recipe} on {path}, session {session:#x}, fencing token {token}) after waiting {waited:?}");
                let hold = metrics::hold_started(self.recipe, label);
                let track = Track(Some(Arc::new(Tracked {
                    hold,
                    recipe: self.recipe,
                    path: self.path,
                    path_label: self.path_label,
                    nodes: names,
                    session,
                    acquired: Instant::now(),
                    lost: AtomicBool::new(false),
                })));
                for node in &mut nodes {
                    node.track = track.clone();
                }
            }
            Ok(None) => debug!(
                "{recipe} on {path}: {} after waiting {waited:?}",
                ended.label()
            ),
            Err(err) => debug!("{recipe} on {path} failed after waiting {waited:?}: {err}"),
        }
        outcome
    }
}

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
    /// A call on the guard found `state` (for a node of `session`; `deleted` if our node is
    /// known to be gone). Cheap while `Held`.
    pub(crate) fn observed(&self, state: LockState, session: &Session, deleted: bool) {
        let Some(tracked) = &self.0 else { return };
        if state == LockState::Held || tracked.lost.load(Ordering::Relaxed) {
            return;
        }
        let cause = match state {
            _ if deleted => LossCause::Deleted,
            LockState::Suspended if session.liveness() == Liveness::Connected => LossCause::Lease,
            LockState::Suspended => return, // A lost connection: not (yet) a loss.
            _ => ended(session),
        };
        tracked.lost(cause);
    }

    /// Releasing our node ended with `deleted` (as `Session::delete_node` reports it).
    pub(crate) fn released(&self, deleted: &Result<bool>, session: &Session) {
        let Some(tracked) = &self.0 else { return };
        match deleted {
            Ok(false) => tracked.lost(LossCause::Deleted),
            Err(Error::SessionExpired | Error::Closed | Error::Forked) => {
                tracked.lost(ended(session))
            }
            _ => {}
        }
    }
}

/// Why an ended session's locks are lost.
fn ended(session: &Session) -> LossCause {
    match session.ended_error() {
        Error::SessionExpired => LossCause::Expired,
        _ => LossCause::Closed,
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
            "released {} ({} on {}, session {:#x}) after holding {held:?}",
            self.nodes,
            self.recipe.label(),
            self.path,
            self.session
        );
    }
}
