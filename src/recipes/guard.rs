//! `LockGuard`: proof that one lock node is held, shared by every single-node recipe.

use std::fmt;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::core::held::Held;
use crate::core::wait::Wait;
use crate::error::Result;
use crate::rt::runtime::deadline_after;

use super::fence::{Bound, Fence, FencedTransaction};
use super::guard_calls::guard_calls;

/// Proof that a lock is held; releases it when dropped.
///
/// Returned by [`DistributedMutex`](crate::DistributedMutex) (and, under the names
/// [`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard) and
/// [`Leadership`](crate::Leadership), by the other recipes). It owns what it needs (it keeps
/// its [`Client`] alive): it can outlive the lock object it came from, be
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
/// release went through. A guard holding the last clone of its [`Client`] also closes the
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

    guard_calls!("the lock",
        fencing: "The token of our lock node: the lock path's generation and the node's creation zxid.");

    /// The guard's one node.
    fn nodes(&self) -> std::iter::Once<&Held> {
        std::iter::once(&self.held)
    }

    fn nodes_to_release(&mut self) -> Vec<&mut Held> {
        vec![&mut self.held]
    }

    /// Whether another process asked this holder to release the lock (revocation; only for
    /// locks made revocable, e.g. [`DistributedMutex::revocable`](crate::DistributedMutex::revocable)).
    /// Never blocks. The holder decides what to do; nothing is released for it.
    pub fn revocation_requested(&self) -> bool {
        self.held.revocation_requested()
    }

    /// Blocks until revocation is requested (`true`), or until the node or the session is
    /// gone (`false`). Returns `false` at once for a lock that was not made revocable.
    pub fn wait_revocation(&self) -> bool {
        self.wait_revocation_with(Wait::forever())
    }

    /// As [`wait_revocation`](Self::wait_revocation), as a future (`Send`, any executor):
    /// ready with `true` once revocation is requested, `false` once the node or the session is
    /// gone (at once for a lock that was not made revocable). Cancel safe: dropping it stops
    /// only the wait (the node's watch belongs to the guard). Race it against the work the
    /// lock protects (`select!`), or bound it with a runtime's timeout.
    pub async fn wait_revocation_async(&self) -> bool {
        self.held.wait_revocation_async().await
    }

    /// Blocks until revocation is requested (`true`) or `timeout` passes (`false`). Returns
    /// `false` at once for a lock that was not made revocable.
    pub fn wait_revocation_timeout(&self, timeout: Duration) -> bool {
        self.wait_revocation_with(Wait::timeout(timeout))
    }

    /// Blocks until revocation is requested (`true`), or until `wait`'s timeout passes or its
    /// token is cancelled (`false`, at once if it already is), as
    /// [`wait_lost_with`](Self::wait_lost_with) does. Also returns `false` once the node or
    /// the session is gone, and at once for a lock that was not made revocable.
    pub fn wait_revocation_with(&self, wait: Wait) -> bool {
        let deadline = wait.deadline();
        self.held.wait_revocation(deadline, wait.cancel_token())
    }

    /// As [`wait_revocation_with`](Self::wait_revocation_with), as a future (`Send`, any
    /// executor): `false` once `wait`'s timeout or deadline passes (zklock's own timer) or its
    /// token is cancelled. Cancel safe, as
    /// [`wait_revocation_async`](Self::wait_revocation_async).
    pub async fn wait_revocation_with_async(&self, wait: Wait) -> bool {
        let requested = self.held.wait_revocation_async();
        wait.race(requested).await.unwrap_or(false)
    }

    /// The release of a dropped guard, blocking no later than `deadline` (a guard of several,
    /// dropped together, shares one bound with the others).
    pub(crate) fn release_on_drop(&mut self, deadline: Instant) {
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
    /// [`fencing`](Self::fencing), which a store compares per lock path.
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
        let bound = Bound::call(&self.client);
        self.client
            .blocking(self.fence().set_data(path, data, &bound))
    }

    /// As [`fenced_set_data`](Self::fenced_set_data), blocking at most about `timeout`
    /// (monotonic clock, from the call; never longer than `fenced_set_data`'s bound). Same as
    /// [`fenced_set_data_with(path, data, Wait::timeout(timeout))`](Self::fenced_set_data_with).
    ///
    /// # Errors
    /// As [`fenced_set_data_with`](Self::fenced_set_data_with).
    pub fn fenced_set_data_timeout(
        &self,
        path: &str,
        data: &[u8],
        timeout: Duration,
    ) -> Result<()> {
        self.fenced_set_data_with(path, data, Wait::timeout(timeout))
    }

    /// As [`fenced_set_data`](Self::fenced_set_data), waiting as `wait` says: its timeout
    /// (never longer than `fenced_set_data`'s own bound, the session timeout) and its
    /// [`CancelToken`](crate::CancelToken), for a worker that must give up a write when
    /// the service shuts down or a step's time is up. What the caller learns depends on
    /// whether the write had left:
    /// - not sent yet (the connection down, or waiting for it):
    ///   [`Error::ConnectionLoss`](crate::Error::ConnectionLoss) naming the timeout once it
    ///   passes, [`Error::Cancelled`](crate::Error::Cancelled) once the token is cancelled (at
    ///   once if it already is). Nothing was written.
    /// - sent: [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) once the timeout passes
    ///   or the token is cancelled before the reply. The write may still be applied, but only
    ///   while our node exists. It is never resent: read the data back under the lock.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// # let guard = zklock::DistributedMutex::new(&client, "/locks/orders")?.lock()?;
    /// use std::time::Duration;
    /// use zklock::{Error, Wait};
    /// let shutdown = zklock::CancelToken::new();
    /// let wait = Wait::timeout(Duration::from_millis(300)).cancel_on(&shutdown);
    /// match guard.fenced_set_data_with("/orders/1042", b"shipped", wait) {
    ///     Ok(()) => {}
    ///     // Nothing written: retry while the lock is held, or give up.
    ///     Err(Error::ConnectionLoss { .. } | Error::Cancelled) => {}
    ///     Err(Error::LockLost { .. }) => { /* stop: someone else may hold it now */ }
    ///     // Maybe written: read it back under the lock before doing anything else.
    ///     Err(Error::OutcomeUnknown { path }) => eprintln!("{path}: outcome unknown"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`fenced_set_data`](Self::fenced_set_data), plus
    /// [`Error::Cancelled`](crate::Error::Cancelled).
    pub fn fenced_set_data_with(&self, path: &str, data: &[u8], wait: Wait) -> Result<()> {
        let bound = Bound::with(&self.client, &wait);
        self.client
            .blocking(self.fence().set_data(path, data, &bound))
    }

    /// As [`fenced_set_data`](Self::fenced_set_data), as a future. Dropped after the write was
    /// sent, its outcome stays unknown: it may be applied, but only while our node exists.
    ///
    /// # Errors
    /// As [`fenced_set_data`](Self::fenced_set_data).
    pub async fn fenced_set_data_async(&self, path: &str, data: &[u8]) -> Result<()> {
        let bound = Bound::call(&self.client);
        self.fence().set_data(path, data, &bound).await
    }

    /// As [`fenced_set_data_with`](Self::fenced_set_data_with), as a future (the timeout on
    /// zklock's own timer). Dropped after the write was sent, its outcome stays unknown, as
    /// [`fenced_set_data_async`](Self::fenced_set_data_async)'s.
    ///
    /// # Errors
    /// As [`fenced_set_data_with`](Self::fenced_set_data_with).
    pub async fn fenced_set_data_with_async(
        &self,
        path: &str,
        data: &[u8],
        wait: Wait,
    ) -> Result<()> {
        let bound = Bound::with(&self.client, &wait);
        self.fence().set_data(path, data, &bound).await
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
        let bound = Bound::call(&self.client);
        self.client.blocking(self.fence().delete(path, &bound))
    }

    /// As [`fenced_delete`](Self::fenced_delete), blocking at most about `timeout`. Same as
    /// [`fenced_delete_with(path, Wait::timeout(timeout))`](Self::fenced_delete_with).
    ///
    /// # Errors
    /// As [`fenced_delete_with`](Self::fenced_delete_with).
    pub fn fenced_delete_timeout(&self, path: &str, timeout: Duration) -> Result<bool> {
        self.fenced_delete_with(path, Wait::timeout(timeout))
    }

    /// As [`fenced_delete`](Self::fenced_delete), waiting as `wait` says, with the outcomes of
    /// [`fenced_set_data_with`](Self::fenced_set_data_with): not sent,
    /// [`Error::ConnectionLoss`](crate::Error::ConnectionLoss) or
    /// [`Error::Cancelled`](crate::Error::Cancelled) (nothing deleted); sent and unanswered,
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown).
    ///
    /// # Errors
    /// As [`fenced_delete`](Self::fenced_delete), plus
    /// [`Error::Cancelled`](crate::Error::Cancelled).
    pub fn fenced_delete_with(&self, path: &str, wait: Wait) -> Result<bool> {
        let bound = Bound::with(&self.client, &wait);
        self.client.blocking(self.fence().delete(path, &bound))
    }

    /// As [`fenced_delete`](Self::fenced_delete), as a future. Dropped after the delete was
    /// sent, its outcome stays unknown: it may be applied, but only while our node exists.
    ///
    /// # Errors
    /// As [`fenced_delete`](Self::fenced_delete).
    pub async fn fenced_delete_async(&self, path: &str) -> Result<bool> {
        let bound = Bound::call(&self.client);
        self.fence().delete(path, &bound).await
    }

    /// As [`fenced_delete_with`](Self::fenced_delete_with), as a future (the timeout on
    /// zklock's own timer). Dropped after the delete was sent, its outcome stays unknown, as
    /// [`fenced_delete_async`](Self::fenced_delete_async)'s.
    ///
    /// # Errors
    /// As [`fenced_delete_with`](Self::fenced_delete_with).
    pub async fn fenced_delete_with_async(&self, path: &str, wait: Wait) -> Result<bool> {
        let bound = Bound::with(&self.client, &wait);
        self.fence().delete(path, &bound).await
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
