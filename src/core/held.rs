//! A node that holds a lock: its state, as the one rule decides it (see `standing.rs`), the
//! wait for trouble, revocation, and the release.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use log::{debug, warn};

use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::{block_on_or_stop, deadline_after};
use crate::znode::token::FencingToken;

use super::claim::Claimed;
use super::cohort::{Cohort, LocalNode, Release};
use super::hold::Hold;
use super::own_node::OwnNodeWatch;
use super::seam::HoldingSession;
use super::session_view::{Liveness, NodeStat};
use super::standing::{LockState, Standing};
use super::track::Track;
use super::withdraw::Withdrawals;

/// How long dropping a guard waits for the server to confirm its release unless
/// [`ClientBuilder::release_timeout`](crate::ClientBuilder::release_timeout) says otherwise.
pub const DEFAULT_RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

/// How often a holder waiting for trouble looks at its own node's deletion flag.
const OWN_NODE_POLL: Duration = Duration::from_millis(50);

/// A node that holds a lock, released on drop.
pub(crate) struct Held {
    session: Arc<dyn HoldingSession>,
    lock_path: String,
    node_path: String,
    stat: NodeStat,
    /// The lock path's creation time when our node was created in it (see [`FencingToken`]).
    generation: i64,
    /// Listens for our node's deletion by someone else (and, for revocable locks, for
    /// revocation requests). Set at the claim for revocable locks; otherwise the first time
    /// anyone asks for the lock's state, so that a caller who never asks pays nothing for it
    /// (a watch costs a request to set and one to remove before the release). With local
    /// handoff, set at the claim, once for all the node's local holders (see `cohort.rs`).
    /// Empty if it could not be set (the session was gone).
    own_node: OnceLock<Option<OwnNodeWatch>>,
    /// Made revocable: revocation requests are listened for (else ignored).
    revocable: bool,
    released: bool,
    /// Released in the background when dropped, never waiting: taken by an async call, the
    /// guard may be dropped on an async runtime's worker thread.
    pub(crate) background_drop: bool,
    /// What the acquisition's front end reports about this node (see `track.rs`).
    pub(crate) track: Track,
    /// How many times the node was passed on inside this process before this holder.
    local: u16,
    /// With local handoff: the local queue the release goes through (see `cohort.rs`).
    cohort: Option<Arc<Cohort<Held>>>,
}

impl<S: HoldingSession + super::seam::ZkSession> Claimed<S> {
    /// The node a guard keeps, from our node claimed on a session of the client.
    pub(crate) fn held(self, lock_path: &str) -> Held {
        Held::new(
            self.session,
            lock_path,
            self.node_path,
            self.stat,
            self.generation,
        )
    }
}

impl Hold for Held {
    fn node_path(&self) -> &str {
        Held::node_path(self)
    }
    fn liveness(&self) -> Liveness {
        Held::liveness(self)
    }
    fn release_in_background(&mut self, done: impl Send + 'static) {
        Held::release_in_background(self, done);
    }
    fn release_logged(&mut self, wait: Duration) -> impl Future<Output = ()> + Send + '_ {
        Held::release_logged(self, wait)
    }
}

impl Held {
    /// Our node `node_path` in `lock_path`, claimed on `session` with `stat`, in the lock path's
    /// `generation`; not watched until someone asks for its state.
    pub(super) fn new(
        session: Arc<dyn HoldingSession>,
        lock_path: &str,
        node_path: String,
        stat: NodeStat,
        generation: i64,
    ) -> Held {
        Held {
            session,
            lock_path: lock_path.to_owned(),
            node_path,
            stat,
            generation,
            own_node: OnceLock::new(),
            revocable: false,
            released: false,
            background_drop: false,
            track: Track::default(),
            local: 0,
            cohort: None,
        }
    }

    /// Listens for revocation requests (and our node's deletion) from now on.
    pub(super) fn make_revocable(&mut self) -> Result<()> {
        let watch = self.session.watch_own_node(&self.node_path)?;
        self.own_node = OnceLock::from(Some(watch));
        self.revocable = true;
        Ok(())
    }

    /// Where the session holding the node stands.
    pub(crate) fn liveness(&self) -> Liveness {
        self.session.liveness()
    }

    /// The timeout of the session holding the node.
    pub(crate) fn session_timeout(&self) -> Duration {
        self.session.timeout()
    }

    pub(crate) fn node_path(&self) -> &str {
        &self.node_path
    }

    pub(crate) fn fencing_token(&self) -> i64 {
        self.stat.czxid
    }

    pub(crate) fn fencing(&self) -> FencingToken {
        FencingToken::local_to(self.generation, self.stat.czxid, self.local)
    }

    pub(crate) fn session_id(&self) -> i64 {
        self.session.id()
    }

    /// Decided now, on the calling thread, by the one rule (see `standing.rs`): `Held` only
    /// while the session is connected, our node is not known to be gone, and the lease has not
    /// run out (see `session/lease.rs`).
    pub(crate) fn state(&self) -> LockState {
        self.standing().into()
    }

    /// Where the lock stands now, watching our node from now on; a loss seen is reported.
    fn standing(&self) -> Standing {
        let deleted = self.own_node().is_some_and(OwnNodeWatch::deleted);
        let standing = self.session.standing(deleted);
        self.track.observed(standing);
        standing
    }

    /// The watch on our node, set now if it is not yet.
    fn own_node(&self) -> Option<&OwnNodeWatch> {
        self.own_node
            .get_or_init(|| match self.session.watch_own_node(&self.node_path) {
                Ok(watch) => Some(watch),
                Err(err) => {
                    debug!("cannot watch {}: {err}", self.node_path);
                    None
                }
            })
            .as_ref()
    }

    /// The state as far as known without starting to watch our node (for `Debug`).
    pub(crate) fn peek_state(&self) -> LockState {
        let deleted = self.watched().is_some_and(OwnNodeWatch::deleted);
        self.session.standing(deleted).into()
    }

    /// The watch on our node if it is set already (without setting it).
    fn watched(&self) -> Option<&OwnNodeWatch> {
        self.own_node.get().and_then(Option::as_ref)
    }

    /// How much longer, from now, the holder can be sure it holds the lock; `None` unless
    /// `Held`. Sends nothing (see [`standing_unwatched`](Self::standing_unwatched)).
    pub(crate) fn lease_remaining(&self) -> Option<Duration> {
        self.standing_unwatched().lease()
    }

    /// Where the lock stands now without starting to watch our node, so that a check between
    /// a holder's steps sends nothing: the session and its lease, and our node's deletion only
    /// once something else set the watch. A loss seen is reported, as by `state`.
    pub(crate) fn standing_unwatched(&self) -> Standing {
        let deleted = self.watched().is_some_and(OwnNodeWatch::deleted);
        let standing = self.session.standing(deleted);
        self.track.observed(standing);
        standing
    }

    /// Blocks until the state is no longer `Held`, or until `deadline` (`None` then). Wakes
    /// on session changes, and on its own (the calling thread's clock) when the lease would
    /// run out, so a stalled runtime thread cannot keep it waiting.
    ///
    /// With `cancel`, also returns `None` once it is cancelled.
    pub(crate) fn wait_not_held(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Option<LockState> {
        let mut wait = std::pin::pin!(self.wait_not_held_async(deadline));
        let stops = cancel.cloned();
        block_on_or_stop(wait.as_mut(), None, stops.as_slice()).unwrap_or(None)
    }

    /// As [`wait_not_held`](Self::wait_not_held), awaited (a cancellation is the future's
    /// drop, or a race with the token).
    pub(crate) async fn wait_not_held_async(&self, deadline: Option<Instant>) -> Option<LockState> {
        loop {
            let standing = self.standing();
            let Some(lease) = standing.lease() else {
                return Some(standing.into());
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            // Look again when the lease would run out (renewals move it on), and, watching
            // our node too, between short waits.
            let mut step = deadline_after(lease);
            if self.own_node().is_some() {
                step = step.min(deadline_after(OWN_NODE_POLL));
            }
            let until = Some(deadline.map_or(step, |d| d.min(step)));
            self.session.wait_disconnected(until).await;
        }
    }

    pub(crate) fn revocation_requested(&self) -> bool {
        self.revocable
            && self
                .watched()
                .is_some_and(OwnNodeWatch::revocation_requested)
    }

    pub(crate) fn wait_revocation(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> bool {
        self.revocable
            && self
                .watched()
                .is_some_and(|w| w.wait_revocation(deadline, cancel))
    }

    /// As [`wait_revocation`](Self::wait_revocation), awaited (cancelled by dropping it).
    pub(crate) async fn wait_revocation_async(&self) -> bool {
        match self.watched().filter(|_| self.revocable) {
            Some(watch) => watch.wait_revocation_async().await,
            None => false,
        }
    }

    /// The token closing the client cancels: a caller blocked on a release stops on it, so
    /// that a release stuck on a silent connection ends at the close.
    pub(crate) fn closes(&self) -> &CancelToken {
        self.session.closes()
    }

    /// Releases, for a caller who wants the outcome (`unlock`): deletes our node, waiting at
    /// most about `wait` in all for the server's reply (the background retry takes over
    /// after that). A delete not confirmed in time is [`Error::OutcomeUnknown`]: it may have
    /// been applied, or may be applied later. Dropped before the delete is confirmed, the
    /// release goes on in the background.
    pub(crate) async fn release_within_async(&mut self, wait: Duration) -> Result<()> {
        if self.released {
            return Ok(());
        }
        if let Release::Handed = self.hand_on_locally() {
            return Ok(());
        }
        let deadline = deadline_after(wait);
        let lost = || Error::LockLost {
            path: self.lock_path.clone(),
        };
        // Stop watching our node before it goes: the watch is removed before the delete is
        // sent, so our own release fires no notification.
        if let Some(watch) = self.own_node.take().flatten() {
            watch.stop_async(wait).await;
        }
        // Released from here on: the delete below goes on in the background if this future
        // is dropped. (Dropped before, while the watch stopped, the node is not released
        // yet, and its owner's drop releases it.)
        self.released = true;
        let left = deadline.saturating_duration_since(Instant::now());
        let deleted = self.session.delete_node(&self.node_path, left).await;
        self.track.released(&deleted, self.session.as_ref());
        match deleted {
            Ok(true) => Ok(()),
            // Someone else deleted our node while we believed we held the lock.
            Ok(false) => Err(lost()),
            Err(Error::SessionExpired) => Err(lost()),
            // Closing the client ended the session, and the node with it: the lock was let
            // go, not lost.
            Err(Error::Closed) => Err(Error::Closed),
            // `delete_node`'s word for "not confirmed in time, retried in the background",
            // whether the connection is down or the server merely slow: the caller cannot
            // know whether the lock is free yet, and the connection may be healthy.
            Err(Error::ConnectionLoss { .. }) => Err(Error::OutcomeUnknown {
                path: self.node_path.clone(),
            }),
            Err(err) => Err(err),
        }
    }

    /// Releases without waiting: the delete goes on in the background until the node is gone
    /// or the session has ended; `done` is dropped then.
    pub(crate) fn release_in_background(&mut self, done: impl Send + 'static) {
        if self.released {
            return;
        }
        if let Release::Handed = self.hand_on_locally() {
            return;
        }
        self.released = true;
        if let Some(watch) = self.own_node.take().flatten() {
            watch.stop_in_background();
        }
        // The hold ends with the release asked for; its outcome is the background's.
        self.track.released(&Ok(true), self.session.as_ref());
        if self.session.liveness() != Liveness::Ended {
            self.session
                .withdraw_in_background(&self.node_path, Box::new(done));
        }
    }
}

impl Held {
    /// With local handoff, passes the node to the next local caller if its cohort allows;
    /// otherwise (and without local handoff) the node is to be released through the server.
    fn hand_on_locally(&mut self) -> Release {
        let Some(cohort) = self.cohort.clone() else {
            return Release::Server;
        };
        let release = cohort.release(self);
        if let Release::Server = release {
            self.cohort = None;
        }
        release
    }
}

impl LocalNode for Held {
    fn may_hand_on(&self) -> bool {
        self.peek_state() == LockState::Held && !self.revocation_requested()
    }

    fn local(&self) -> u16 {
        self.local
    }

    fn hand_on(&mut self) -> Held {
        let next = Held {
            session: self.session.clone(),
            lock_path: self.lock_path.clone(),
            node_path: self.node_path.clone(),
            stat: self.stat,
            generation: self.generation,
            own_node: std::mem::take(&mut self.own_node),
            revocable: self.revocable,
            released: false,
            background_drop: false,
            track: Track::default(),
            local: self.local + 1,
            cohort: self.cohort.take(),
        };
        // This holder's hold ends here, as at a release.
        self.released = true;
        self.track.released(&Ok(true), self.session.as_ref());
        next
    }

    fn join(&mut self, cohort: Arc<Cohort<Held>>) {
        self.cohort = Some(cohort);
    }

    fn leave(&mut self) {
        self.cohort = None;
    }

    fn claimed(&mut self) {
        self.own_node();
    }

    fn path(&self) -> &str {
        &self.node_path
    }

    fn withdraw(mut self, withdrawals: &Withdrawals) {
        // Waited for only on a live connection, as a withdrawn node (see `withdraw.rs`).
        let connected = self.session.liveness() == Liveness::Connected;
        let done = connected.then(|| withdrawals.begin());
        self.release_in_background(done);
    }

    fn session_ended(&self) -> Option<Error> {
        (self.session.liveness() == Liveness::Ended).then(|| self.session.ended_error())
    }
}

impl Held {
    /// The release of a dropped guard, blocking at most about `wait` (the client's release
    /// timeout, or what is left of it): never cut short by a cancellation in progress on this
    /// thread; a failure is logged (a closed client's release has nothing left to do, and
    /// one handed to the background was logged when it was).
    pub(crate) fn release_on_drop(&mut self, wait: Duration) {
        if self.background_drop {
            // Taken by an async call: maybe dropped on a runtime's worker, which must not
            // wait for the server.
            return self.release_in_background(());
        }
        let closes = self.session.closes().clone();
        let mut release = std::pin::pin!(self.release_logged(wait));
        let _ = block_on_or_stop(release.as_mut(), None, &[closes]);
    }

    /// Releases, waiting at most about `wait`, and logs a failure instead of returning it.
    pub(crate) async fn release_logged(&mut self, wait: Duration) {
        match self.release_within_async(wait).await {
            Ok(()) => {}
            Err(err @ Error::OutcomeUnknown { .. }) => debug!(
                "release of {} (session {:#x}): {err}",
                self.node_path,
                self.session.id()
            ),
            Err(err) if self.session.liveness() == Liveness::Ended => debug!(
                "release of {} (session {:#x}): {err}",
                self.node_path,
                self.session.id()
            ),
            Err(err) => warn!(
                "release of {} (session {:#x}): {err}",
                self.node_path,
                self.session.id()
            ),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Only reached for a node no guard owns (its front end released it otherwise), maybe
        // inside a dropped future: never waits.
        self.release_in_background(());
    }
}
