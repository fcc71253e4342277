//! `LockGuard`: proof that one lock node is held, shared by every single-node recipe.

use std::fmt;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::core::held::Held;
use crate::core::standing::LockState;
use crate::error::Result;
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::deadline_after;

use super::fence::{Fence, FencedTransaction};

/// Proof that a lock is held; releases it when dropped.
///
/// Returned by [`DistributedMutex`](crate::DistributedMutex) (and, under the names
/// [`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard) and
/// [`Leadership`](crate::Leadership), by the other recipes). It owns what it needs (it keeps
/// its [`Client`](crate::Client) alive): it can outlive the lock object it came from, be
/// returned from functions and tasks, be stored next to its lock, and be moved
/// to and released from any thread or task.
///
/// Dropping the guard deletes the lock node, blocking at most the client's
/// [release timeout](crate::ClientBuilder::release_timeout) (one second by default) for the
/// server's reply; a delete not confirmed by then (a connection down, a frozen or slow server)
/// is retried in the background until the node is gone or the session has ended (which
/// removes the node too). A guard taken by an `_async` call never blocks when dropped (it may
/// be dropped on an async runtime's worker): its release goes to the background at once. Use
/// [`unlock`](Self::unlock) or [`unlock_async`](Self::unlock_async) to learn whether the
/// release went through. A guard holding the last clone of its [`Client`](crate::Client) also closes the
/// client when dropped (see there).
#[must_use = "the lock is released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    pub(crate) held: Held,
    /// For fenced writes, which go through the client's current session.
    client: Client,
}

impl LockGuard {
    pub(crate) fn new(held: Held, client: Client) -> Self {
        LockGuard { held, client }
    }

    /// The full path of our lock node (relative to the client's chroot).
    pub fn node_path(&self) -> &str {
        self.held.node_path()
    }

    /// The fencing token to pass to a store outside ZooKeeper, so that it can refuse a stale
    /// holder's late writes: it increases from one holder of this lock to the next, also when
    /// the ensemble was re-created from scratch (see [`FencingToken`](crate::FencingToken)
    /// for the rule and its one assumption). Never blocks.
    pub fn fencing(&self) -> crate::FencingToken {
        self.held.fencing()
    }

    /// The lock node's creation zxid: it increases from one holder of this lock to the next
    /// only while the ensemble keeps its data. When an ensemble is re-created (data dirs
    /// wiped), zxids begin again, and a store that remembers the highest number it has seen
    /// would refuse every new holder. Prefer [`fencing`](Self::fencing), which orders tokens
    /// by the lock path's generation first; this number is its
    /// [`zxid`](crate::FencingToken::zxid) part. Never blocks.
    pub fn fencing_token(&self) -> i64 {
        self.held.fencing_token()
    }

    /// The id of the session that holds the lock.
    pub fn session_id(&self) -> i64 {
        self.held.session_id()
    }

    /// Whether the lock is still ours as far as this process can tell; never blocks.
    ///
    /// Decided when called, on the calling thread, from a lease on the monotonic clock: the
    /// lock is [`LockState::Held`] only while less than 2/3 of the session timeout has passed
    /// since the send time of the latest write or sync the server answered (the server cannot
    /// expire the session before a full session timeout after that). So the state turns
    /// [`LockState::Suspended`] before the server may expire the session and hand the lock to
    /// someone else, also when this process was frozen (SIGSTOP, a long pause) or zklock's
    /// network thread could not run: nothing the network thread last said is trusted past the
    /// lease. It also turns `Suspended` when the connection drops, and comes back to `Held`
    /// only when a new answer from the server proves the session alive.
    ///
    /// The first call (of this, [`is_held`](Self::is_held),
    /// [`lease_remaining`](Self::lease_remaining) or the `wait_lost` calls) also starts
    /// watching the lock's node, so that its deletion by someone else (see
    /// [`DistributedMutex::break_contender`](crate::DistributedMutex::break_contender)) turns
    /// the state [`LockState::Lost`] as soon as the server reports it (a lock made
    /// [`revocable`](crate::DistributedMutex::revocable) watches from the start). A holder that
    /// never asks pays nothing for that watch; one that asks pays two requests (set, then
    /// removed before the release, which so notifies nobody more).
    pub fn state(&self) -> LockState {
        self.held.state()
    }

    /// `true` while [`state`](Self::state) is [`LockState::Held`]. Never blocks.
    pub fn is_held(&self) -> bool {
        self.state() == LockState::Held
    }

    /// How much longer, from now, this holder can be sure it holds the lock: the time left on
    /// its lease (see [`state`](Self::state)). `None` when the state is not
    /// [`LockState::Held`]; otherwise more than zero and less than the session timeout. Never
    /// blocks.
    ///
    /// The pattern for work that must not outlive the lock: before each step, check that the
    /// lease covers the time the step needs, and stop (or renew by waiting for
    /// [`is_held`](Self::is_held) again) if it does not.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// # let mutex = zklock::DistributedMutex::new(&client, "/jobs/compact")?;
    /// # let steps: Vec<fn()> = Vec::new();
    /// use std::time::Duration;
    /// let guard = mutex.lock()?;
    /// for step in steps {
    ///     match guard.lease_remaining() {
    ///         Some(left) if left > Duration::from_millis(500) => step(),
    ///         _ => break, // not sure enough that we still hold it: stop touching the resource
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lease_remaining(&self) -> Option<Duration> {
        self.held.lease_remaining()
    }

    /// Blocks until the lock is no longer [`LockState::Held`] and returns the new state:
    /// [`LockState::Suspended`] (connection in doubt: pause work on the resource) or
    /// [`LockState::Lost`]. Lets a holder learn of trouble without polling, for example from a
    /// watchdog thread that stops the work the lock protects.
    pub fn wait_lost(&self) -> LockState {
        self.held
            .wait_not_held(None, None)
            .unwrap_or(LockState::Lost)
    }

    /// As [`wait_lost`](Self::wait_lost), but gives up after `timeout` (monotonic clock) and
    /// returns `None` if the lock was still held all along.
    pub fn wait_lost_timeout(&self, timeout: Duration) -> Option<LockState> {
        self.held.wait_not_held(Some(deadline_after(timeout)), None)
    }

    /// As [`wait_lost`](Self::wait_lost), as a future: ready once the lock is no longer
    /// [`LockState::Held`], with the new state. It wakes on session changes and when the
    /// lease would run out (on the monotonic clock), so a stalled network thread cannot keep
    /// it pending. Cancel safe: dropping it stops nothing but the wait. Race it against the
    /// work the lock protects (`select!`) to stop that work when the lock is lost.
    pub async fn wait_lost_async(&self) -> LockState {
        self.held
            .wait_not_held_async(None)
            .await
            .unwrap_or(LockState::Lost)
    }

    /// As [`wait_lost`](Self::wait_lost), but returns `None` as soon as `token` is cancelled
    /// (at once if it already is) while the lock is still held.
    ///
    /// For a watchdog thread that the guard's owner must end promptly before it releases the
    /// lock (the owner needs the guard back, which the watchdog borrows): cancel the token,
    /// join the thread, unlock. No polling interval delays the release.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// # let work = || ();
    /// let guard = zklock::DistributedMutex::new(&client, "/jobs/report")?.lock()?;
    /// let done = zklock::CancelToken::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         if let Some(state) = guard.wait_lost_cancellable(&done) {
    ///             eprintln!("lock {state:?}: stop the work");
    ///         }
    ///     });
    ///     work();
    ///     done.cancel(); // the watchdog returns at once
    /// });
    /// guard.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn wait_lost_cancellable(&self, token: &CancelToken) -> Option<LockState> {
        self.held.wait_not_held(None, Some(token))
    }

    /// Whether another process asked this holder to release the lock (revocation; only for
    /// locks made revocable, e.g. [`DistributedMutex::revocable`](crate::DistributedMutex::revocable)).
    /// Never blocks. The holder decides what to do; nothing is released for it.
    pub fn revocation_requested(&self) -> bool {
        self.held.revocation_requested()
    }

    /// Blocks until revocation is requested (`true`) or `timeout` passes (`false`). Returns
    /// `false` at once for a lock that was not made revocable.
    pub fn wait_revocation_timeout(&self, timeout: Duration) -> bool {
        self.held
            .wait_revocation(Some(deadline_after(timeout)), None)
    }

    /// Blocks until revocation is requested (`true`), or until `token` is cancelled (`false`,
    /// at once if it already is), as [`wait_lost_cancellable`](Self::wait_lost_cancellable)
    /// does. Also returns `false` once the node or the session is gone, and at once for a
    /// lock that was not made revocable.
    pub fn wait_revocation_cancellable(&self, token: &CancelToken) -> bool {
        self.held.wait_revocation(None, Some(token))
    }

    /// Releases the lock and reports the outcome. Blocks for at most one reply from the server,
    /// bounded by the session timeout (returns at once when the connection is known to be
    /// down); see [`unlock_timeout`](Self::unlock_timeout) for a shorter bound.
    ///
    /// # Errors
    /// - [`Error::LockLost`](crate::Error::LockLost) if the lock had been lost (session
    ///   expired, node deleted by someone else).
    /// - [`Error::Closed`](crate::Error::Closed) if the client was closed first: closing
    ///   ended the session, which deleted the node.
    /// - [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) (naming our node) if the
    ///   delete could not be confirmed in time, the connection being down or the server slow
    ///   or frozen: the node may still be there, so another contender may not have the lock
    ///   yet. The delete is retried in the background until the node is gone or the session
    ///   has ended (which removes it too). (Earlier versions of zklock returned
    ///   [`Error::ConnectionLoss`](crate::Error::ConnectionLoss) here.)
    pub fn unlock(mut self) -> Result<()> {
        let _closing = self.client.watch_close();
        self.held.release()
    }

    /// As [`unlock`](Self::unlock), blocking at most about `timeout` (monotonic clock, from the
    /// call) for the server to confirm the release; after that the release goes on in the
    /// background and the call returns
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown).
    ///
    /// # Errors
    /// As [`unlock`](Self::unlock).
    pub fn unlock_timeout(mut self, timeout: Duration) -> Result<()> {
        let _closing = self.client.watch_close();
        self.held.release_within(timeout)
    }

    /// As [`unlock`](Self::unlock), as a future: waits for the server's confirmation without
    /// blocking a thread, at most the session timeout. Cancel safe: dropped before the
    /// confirmation, the release goes on in the background (as a dropped guard's does).
    ///
    /// # Errors
    /// As [`unlock`](Self::unlock).
    pub async fn unlock_async(mut self) -> Result<()> {
        // Dropped half-way on an async worker, the guard must not block in its drop.
        self.held.background_drop = true;
        let wait = self.held.session_timeout();
        self.held.release_within_async(wait).await
    }

    /// The release of a dropped guard, blocking no later than `deadline` (a guard of several,
    /// dropped together, shares one bound with the others).
    pub(crate) fn release_on_drop(&mut self, deadline: Instant) {
        // Closing the client wakes a release stuck on a silent connection.
        let _closing = self.client.watch_close();
        let wait = deadline.saturating_duration_since(Instant::now());
        self.held.release_on_drop(wait);
    }

    /// When a guard dropped now must be done releasing.
    pub(crate) fn drop_deadline(&self) -> Instant {
        deadline_after(self.client.release_timeout())
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.release_on_drop(self.drop_deadline());
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("node_path", &self.node_path())
            .field("fencing", &self.fencing())
            .field("state", &self.held.peek_state())
            .finish()
    }
}

/// Fenced writes: ZooKeeper writes the server applies only while this guard's lock node exists.
impl LockGuard {
    fn fence(&self) -> Fence<'_> {
        Fence {
            client: &self.client,
            node_path: self.held.node_path(),
        }
    }

    /// Writes `data` into the node at `path`, creating it (persistent) if absent, but only if
    /// this guard's lock node still exists when the server executes the write.
    ///
    /// The write and the check of our lock node are one atomic ZooKeeper transaction, and the
    /// server deletes our node (release, session expiry, an operator's
    /// [`break_contender`](crate::DistributedMutex::break_contender)) before anyone else can
    /// acquire the lock. So the write is applied while we hold the lock, or not at all: a holder
    /// paused by a GC or `SIGSTOP`, or cut off until its session expired, cannot overwrite what
    /// the next holder wrote, however late its write arrives. The server makes the check, not
    /// this process: the write goes through the client's current session, so it is refused by
    /// the server even when the guard's session has expired and the client has opened another
    /// one since. This protects data that every writer changes through fenced writes (or
    /// otherwise only while holding the lock); data outside ZooKeeper needs
    /// [`fencing`](Self::fencing).
    ///
    /// The check is on our node's existence, not its data version, so a revocation request
    /// (which writes into our node) does not make fenced writes fail: our node's name carries a
    /// random uuid and a sequence number, so once it is gone no contender re-creates it.
    ///
    /// Missing parents of `path` are created (persistent, empty) in the same transaction, so a
    /// stale holder creates nothing at all. If `path` appears or disappears between the attempt
    /// to update it and the attempt to create it, the other form is tried again (each refused
    /// attempt applied nothing).
    ///
    /// Blocks for one round trip (a few more when `path` or its parents must be created),
    /// waiting for a lost connection to return for at most the session timeout, measured from
    /// the call like [`Client::set_data`](crate::Client::set_data); opening a replacement for
    /// an expired session counts against the same bound.
    ///
    /// A write whose reply is lost is never resent and never guessed: the call returns
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown). Resending could apply it twice
    /// (or after a later write of ours), and no read can tell our write from an identical one by
    /// someone else. Whatever happened, it happened only while our node existed. Read the data
    /// back under the lock (or check [`state`](Self::state)) to decide what to do.
    ///
    /// # Errors
    /// - Nothing sent: [`Error::InvalidPath`](crate::Error::InvalidPath);
    ///   [`Error::InvalidArgument`](crate::Error::InvalidArgument) if `data` is over 1,000,000
    ///   bytes; [`Error::ConnectionLoss`](crate::Error::ConnectionLoss) if the connection did
    ///   not return in time; [`Error::Closed`](crate::Error::Closed).
    /// - Nothing written: [`Error::LockLost`](crate::Error::LockLost) (naming the lock path)
    ///   if our lock node is gone; [`Error::NodeChanged`](crate::Error::NodeChanged) if `path`
    ///   kept appearing and disappearing; [`Error::EphemeralParent`](crate::Error::EphemeralParent),
    ///   [`Error::NoAuth`](crate::Error::NoAuth) and other server errors.
    /// - [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) (naming `path`): see above.
    pub fn fenced_set_data(&self, path: &str, data: &[u8]) -> Result<()> {
        let _closing = self.client.watch_close();
        crate::session::blocking(self.fence().set_data(path, data))
    }

    /// As [`fenced_set_data`](Self::fenced_set_data), as a future. Dropped after the write was
    /// sent, its outcome stays unknown: it may be applied, but only while our node exists.
    ///
    /// # Errors
    /// As [`fenced_set_data`](Self::fenced_set_data).
    pub async fn fenced_set_data_async(&self, path: &str, data: &[u8]) -> Result<()> {
        self.fence().set_data(path, data).await
    }

    /// Deletes the node at `path` if this guard's lock node still exists when the server
    /// executes the delete (one atomic transaction; see
    /// [`fenced_set_data`](Self::fenced_set_data) for what that guarantees). Returns
    /// `Ok(false)` if there was no node at `path` (and the lock was still held).
    ///
    /// Blocks for one round trip, waiting for a lost connection to return for at most the
    /// session timeout from the call. Never resent after a lost reply.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) (nothing sent);
    /// [`Error::LockLost`](crate::Error::LockLost) if our lock node is gone (nothing deleted);
    /// [`Error::ZooKeeper`](crate::Error::ZooKeeper) with code -111 if the node has children;
    /// [`Error::NoAuth`](crate::Error::NoAuth); [`Error::ConnectionLoss`](crate::Error::ConnectionLoss)
    /// (not sent); [`Error::Closed`](crate::Error::Closed);
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) if the reply was lost (deleted
    /// or not; if deleted, then while our node existed).
    pub fn fenced_delete(&self, path: &str) -> Result<bool> {
        let _closing = self.client.watch_close();
        crate::session::blocking(self.fence().delete(path))
    }

    /// As [`fenced_delete`](Self::fenced_delete), as a future. Dropped after the delete was
    /// sent, its outcome stays unknown: it may be applied, but only while our node exists.
    ///
    /// # Errors
    /// As [`fenced_delete`](Self::fenced_delete).
    pub async fn fenced_delete_async(&self, path: &str) -> Result<bool> {
        self.fence().delete(path).await
    }

    /// Starts a transaction of several writes, applied atomically, all or none, and only while
    /// this guard's lock node exists (see [`fenced_set_data`](Self::fenced_set_data)). Nothing
    /// is sent until [`FencedTransaction::commit`]. Never blocks.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// # let mutex = zklock::DistributedMutex::new(&client, "/locks/jobs")?;
    /// let guard = mutex.lock()?;
    /// guard
    ///     .transaction()
    ///     .create("/jobs/42", b"claimed")
    ///     .delete("/jobs/queue/42")
    ///     .commit()?;
    /// # Ok(()) }
    /// ```
    pub fn transaction(&self) -> FencedTransaction<'_> {
        FencedTransaction::new(self.fence())
    }
}
