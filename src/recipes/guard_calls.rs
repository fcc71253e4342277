//! The calls every guard offers ([`LockGuard`](super::guard::LockGuard), `Permit`,
//! `MultiGuard`): release, state, lease, wait for loss, fencing. [`guard_calls!`] writes them,
//! with their docs, on a guard that holds one node or several; the functions below are their
//! one implementation, over the guard's nodes.
//!
//! A guard of several nodes (a permit's nodes, a multi-lock's locks) holds them all on one
//! session; its state is the least certain of its nodes' states.

use std::time::{Duration, Instant};

use crate::core::held::Held;
use crate::core::standing::LockState;
use crate::core::wait::Wait;
use crate::error::Result;
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::deadline_after;
use crate::znode::token::FencingToken;

/// How often a guard of several nodes looks at the nodes other than the first, as a lock
/// guard looks at its own node.
const OTHER_NODES_POLL: Duration = Duration::from_millis(50);

/// The least certain of some nodes' states (`Lost` for none).
pub(crate) fn least_certain(states: impl Iterator<Item = LockState>) -> LockState {
    states
        .max_by_key(|s| match s {
            LockState::Held => 0,
            LockState::Suspended => 1,
            _ => 2,
        })
        .unwrap_or(LockState::Lost)
}

pub(crate) fn state<'a>(nodes: impl Iterator<Item = &'a Held>) -> LockState {
    least_certain(nodes.map(Held::state))
}

/// As [`state`], without starting to watch the nodes (nothing sent).
pub(crate) fn lease_state<'a>(nodes: impl Iterator<Item = &'a Held>) -> LockState {
    least_certain(nodes.map(|node| node.standing_unwatched().into()))
}

/// The shortest lease among the nodes; `None` unless every one is held. Sends nothing.
pub(crate) fn lease_remaining<'a>(nodes: impl Iterator<Item = &'a Held>) -> Option<Duration> {
    let mut least: Option<Duration> = None;
    for node in nodes {
        let lease = node.lease_remaining()?;
        least = Some(least.map_or(lease, |l| l.min(lease)));
    }
    least
}

/// Blocks until the nodes are no longer all held (the new state), or `wait`'s timeout passes
/// or its token is cancelled (`None`).
pub(crate) fn wait_lost<'a>(
    nodes: impl Iterator<Item = &'a Held> + Clone,
    wait: &Wait,
) -> Option<LockState> {
    let deadline = wait.deadline();
    let cancel = wait.cancel_token();
    let mut rest = nodes.clone();
    let Some(first) = rest.next() else {
        return Some(LockState::Lost);
    };
    if rest.next().is_none() {
        return first.wait_not_held(deadline, cancel);
    }
    loop {
        let now = state(nodes.clone());
        if now != LockState::Held {
            return Some(now);
        }
        if cancel.is_some_and(|t| t.is_cancelled()) || deadline.is_some_and(|d| Instant::now() >= d)
        {
            return None;
        }
        // A session change wakes the wait on any node (they share one session); another
        // node's deletion is seen at the next look.
        let step = deadline_after(OTHER_NODES_POLL);
        first.wait_not_held(Some(deadline.map_or(step, |d| d.min(step))), cancel);
    }
}

/// As [`wait_lost`] without a timeout or token, awaited (cancelled by dropping it).
pub(crate) async fn wait_lost_async<'a>(
    nodes: impl Iterator<Item = &'a Held> + Clone,
) -> LockState {
    let mut rest = nodes.clone();
    let Some(first) = rest.next() else {
        return LockState::Lost;
    };
    if rest.next().is_none() {
        return first
            .wait_not_held_async(None)
            .await
            .unwrap_or(LockState::Lost);
    }
    loop {
        let now = state(nodes.clone());
        if now != LockState::Held {
            return now;
        }
        let step = deadline_after(OTHER_NODES_POLL);
        if let Some(now) = first.wait_not_held_async(Some(step)).await {
            return now;
        }
    }
}

/// The first node's token (guards are never empty).
pub(crate) fn fencing<'a>(mut nodes: impl Iterator<Item = &'a Held>) -> FencingToken {
    nodes.next().map_or(FencingToken::new(0, 0), Held::fencing)
}

/// Releases every node, in the order given, and reports the first failure (each is released
/// anyway). Each waits for the server's confirmation up to the session timeout or, when `wait`
/// has a deadline, all of them together up to that: a delete not confirmed in time goes on in
/// the background ([`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown)). A cancel of
/// `wait`'s token ends the wait as the deadline does, reported as
/// [`Error::Cancelled`](crate::Error::Cancelled); the nodes not confirmed yet are released in
/// the background, as they are when this future is dropped.
pub(crate) async fn release(nodes: Vec<&mut Held>, wait: &Wait) -> Result<()> {
    let mut nodes = nodes;
    // What is left when the wait stops goes to the background, never blocking: the guard
    // may be dropped on an async runtime's worker, or by a call its caller cancelled.
    for node in &mut nodes {
        node.background_drop = true;
    }
    let deadline = wait.deadline();
    let releasing = async move {
        let mut outcome = Ok(());
        for node in nodes {
            let left = deadline.map_or_else(
                || node.session_timeout(),
                |d| d.saturating_duration_since(Instant::now()),
            );
            if let Err(err) = node.release_within_async(left).await {
                outcome = outcome.and(Err(err));
            }
        }
        outcome
    };
    crate::rt::cancel::unless_cancelled(wait.cancel_token(), releasing)
        .await
        .and_then(|outcome| outcome)
}

/// As [`release`], blocking the calling thread; closing the client ends it too
/// ([`Error::Closed`](crate::Error::Closed)), so that a release stuck on a silent connection
/// ends at the close.
pub(crate) fn release_blocking(nodes: Vec<&mut Held>, wait: &Wait) -> Result<()> {
    let closes: Vec<CancelToken> = nodes
        .first()
        .map(|n| n.closes().clone())
        .into_iter()
        .collect();
    crate::session::blocking_or_stop(release(nodes, wait), &closes)
}

/// Writes the calls every guard shares, for a guard type that provides `fn nodes(&self) ->
/// impl Iterator<Item = &Held> + Clone` (its nodes, in acquisition order), `fn
/// nodes_to_release(&mut self) -> Vec<&mut Held>` (in release order). `$what` names what the
/// guard holds, for the docs; `$fencing` documents which token [`fencing`] is.
macro_rules! guard_calls {
    ($what:literal, fencing: $fencing:literal) => {
        #[doc = concat!("Releases ", $what, " and reports the outcome. Blocks for at most one reply from the server per node, bounded by the session timeout (returns at once when the connection is known to be down); see [`unlock_timeout`](Self::unlock_timeout) for a shorter bound and [`unlock_with`](Self::unlock_with) for a deadline or a cancel token.")]
        ///
        /// # Errors
        /// The first failure (every node is released anyway):
        /// - [`Error::LockLost`](crate::Error::LockLost) if the lock had been lost (session
        ///   expired, node deleted by someone else).
        /// - [`Error::Closed`](crate::Error::Closed) if the client was closed first: closing
        ///   ended the session, which deleted the node.
        /// - [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) (naming the node) if the
        ///   delete could not be confirmed in time, the connection being down or the server
        ///   slow or frozen: the node may still be there, so another contender may not have
        ///   the lock yet. The delete is retried in the background until the node is gone or
        ///   the session has ended (which removes it too).
        pub fn unlock(self) -> $crate::Result<()> {
            self.unlock_with($crate::Wait::forever())
        }

        /// As [`unlock`](Self::unlock), blocking at most about `timeout` in all (monotonic
        /// clock, from the call) for the server to confirm the release; after that the release
        /// goes on in the background and the call returns
        /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown).
        ///
        /// # Errors
        /// As [`unlock`](Self::unlock).
        pub fn unlock_timeout(self, timeout: std::time::Duration) -> $crate::Result<()> {
            self.unlock_with($crate::Wait::timeout(timeout))
        }

        /// As [`unlock`](Self::unlock), waiting for the server's confirmation as `wait` says:
        /// up to its timeout or deadline, in all (as [`unlock_timeout`](Self::unlock_timeout);
        /// [`Wait::forever`](crate::Wait::forever) waits as `unlock` does), and no longer than
        /// until its token is cancelled.
        ///
        /// Either way the release itself is never cut short, only the waiting for it: the
        /// guard is consumed, and a delete not confirmed when the wait ends goes on in the
        /// background until the node is gone or the session has ended, as a dropped guard's
        /// does. A cancel (at once, if the token already is) returns
        /// [`Error::Cancelled`](crate::Error::Cancelled), as a cancelled acquisition does; a
        /// deadline that passes returns [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown),
        /// as `unlock_timeout` does. A release that is over before either is reported as it
        /// went.
        ///
        /// For a shutdown that must not wait on a slow server for the release's outcome:
        ///
        /// ```no_run
        /// # fn main() -> zklock::Result<()> {
        /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
        /// use zklock::{CancelToken, Wait};
        /// let shutdown = CancelToken::new();
        /// let guard = zklock::DistributedMutex::new(&client, "/jobs/compact")?.lock()?;
        /// // ... work; on SIGTERM, another thread cancels `shutdown` ...
        /// match guard.unlock_with(Wait::forever().cancel_on(&shutdown)) {
        ///     Ok(()) => {}
        ///     // Stopped waiting: the release goes on in the background.
        ///     Err(zklock::Error::Cancelled) => {}
        ///     Err(err) => eprintln!("release: {err}"),
        /// }
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// As [`unlock`](Self::unlock), and [`Error::Cancelled`](crate::Error::Cancelled) when
        /// the token was cancelled before the release was confirmed.
        pub fn unlock_with(mut self, wait: $crate::Wait) -> $crate::Result<()> {
            $crate::recipes::guard_calls::release_blocking(self.nodes_to_release(), &wait)
        }

        /// As [`unlock`](Self::unlock), as a future: waits for the server's confirmation
        /// without blocking a thread, at most the session timeout per node. Cancel safe:
        /// dropped before the confirmation, the release goes on in the background (as a
        /// dropped guard's does).
        ///
        /// # Errors
        /// As [`unlock`](Self::unlock).
        pub async fn unlock_async(self) -> $crate::Result<()> {
            self.unlock_with_async($crate::Wait::forever()).await
        }

        /// As [`unlock_with`](Self::unlock_with), as a future (`Send`, any executor): the
        /// deadline is zklock's own timer, and a cancel of the token ends the wait with
        /// [`Error::Cancelled`](crate::Error::Cancelled) while the release goes on in the
        /// background. Cancel safe, as [`unlock_async`](Self::unlock_async).
        ///
        /// ```no_run
        /// # async fn run(guard: zklock::LockGuard) -> zklock::Result<()> {
        /// use std::time::Duration;
        /// use zklock::Wait;
        /// // The outcome if the server confirms within 500 ms; the release goes on regardless.
        /// guard.unlock_with_async(Wait::timeout(Duration::from_millis(500))).await
        /// # }
        /// ```
        ///
        /// # Errors
        /// As [`unlock_with`](Self::unlock_with).
        pub async fn unlock_with_async(mut self, wait: $crate::Wait) -> $crate::Result<()> {
            $crate::recipes::guard_calls::release(self.nodes_to_release(), &wait).await
        }

        #[doc = concat!("Whether ", $what, " is still ours as far as this process can tell, also watching for someone deleting its node; never blocks.")]
        ///
        /// Decided when called, on the calling thread, from a lease on the monotonic clock: a
        /// node is [`LockState::Held`](crate::LockState::Held) only while less than 2/3 of the
        /// session timeout has passed since the send time of the latest write or sync the
        /// server answered (the server cannot expire the session before a full session timeout
        /// after that). So the state turns [`LockState::Suspended`](crate::LockState::Suspended)
        /// before the server may expire the session and hand the lock to someone else, also
        /// when this process was frozen (SIGSTOP, a long pause) or zklock's network thread
        /// could not run: nothing the network thread last said is trusted past the lease. It
        /// also turns `Suspended` when the connection drops, and comes back to `Held` only
        /// when a new answer from the server proves the session alive. A guard of several
        /// nodes (a [`Permit`](crate::Permit) of several nodes, a
        /// [`MultiGuard`](crate::MultiGuard)) reports the least certain of its nodes' states.
        ///
        /// **What it costs, and what it sees beyond the lease.** The first call (of this,
        /// [`is_held`](Self::is_held) or the `wait_lost` calls) starts watching the guard's
        /// nodes, so that a node's deletion by someone else (an operator's
        /// [`break_contender`](crate::DistributedMutex::break_contender)) turns the state
        /// [`LockState::Lost`](crate::LockState::Lost) as soon as the server reports it. That
        /// watch costs up to two requests per node, sent in the background (set now, removed
        /// before the release, which so notifies nobody more), and a task per node: on short
        /// per-entity holds a call per hold cost 6-27% of the cycles per second (two runs of
        /// `examples/bench.rs many_locks_checks`, 10 rounds each;
        /// [`guide::performance`](crate::guide::performance#checking-the-hold-between-steps)).
        /// Later calls send nothing. A lock
        /// made [`revocable`](crate::DistributedMutex::revocable), and an election, watch from
        /// the start, so there the first call costs nothing more either.
        ///
        /// The check between a holder's steps that sends nothing is
        /// [`lease_state`](Self::lease_state) (or [`lease_remaining`](Self::lease_remaining)):
        /// the same lease, without the watch.
        pub fn state(&self) -> $crate::LockState {
            $crate::recipes::guard_calls::state(self.nodes())
        }

        /// `true` while [`state`](Self::state) is [`LockState::Held`](crate::LockState::Held).
        /// Never blocks; its first call on a guard sends up to two requests per node in the
        /// background (a watch for its deletion by someone else, set, then removed at release),
        /// as [`state`](Self::state) says. For the cheap check between steps, which sends
        /// nothing, see [`lease_state`](Self::lease_state).
        pub fn is_held(&self) -> bool {
            self.state() == $crate::LockState::Held
        }

        #[doc = concat!("Where ", $what, " stands by its lease alone: the cheap check between a holder's steps. Never blocks, sends nothing, sets no watch.")]
        ///
        /// The same lease as [`state`](Self::state) (decided when called on the monotonic
        /// clock, so it turns [`LockState::Suspended`](crate::LockState::Suspended) before the
        /// server can expire the session, also after a freeze, an outage or a stalled network
        /// thread; [`LockState::Lost`](crate::LockState::Lost) once the session is known to
        /// have ended or the client is closed), without the watch `state` starts on the first
        /// call. So it cannot see an operator deleting the node (with
        /// [`break_contender`](crate::DistributedMutex::break_contender)) while the session
        /// lives, unless something set that watch already (`state`, `is_held`, the `wait_lost`
        /// calls, a [`revocable`](crate::DistributedMutex::revocable) lock, an election):
        /// then it sees that too. A broken node still cannot make a stale write land where the
        /// server checks: fenced writes are refused once the node is gone, and a store that
        /// checks [`fencing`](Self::fencing) tokens refuses this holder once the next one wrote.
        ///
        /// Measured on short per-entity holds (`examples/bench.rs many_locks_checks`), a call
        /// per hold costs nothing the run-to-run spread shows (+2% and +3% over two runs of 10
        /// rounds), where [`is_held`](Self::is_held) cost 6-27% of the cycles per second
        /// ([`guide::performance`](crate::guide::performance#checking-the-hold-between-steps)).
        ///
        /// ```no_run
        /// # fn main() -> zklock::Result<()> {
        /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
        /// # let steps: Vec<fn()> = Vec::new();
        /// let guard = zklock::DistributedMutex::new(&client, "/orders/1042")?.lock()?;
        /// for step in steps {
        ///     if guard.lease_state() != zklock::LockState::Held {
        ///         break; // not sure any more: stop touching the resource
        ///     }
        ///     step();
        /// }
        /// # Ok(()) }
        /// ```
        pub fn lease_state(&self) -> $crate::LockState {
            $crate::recipes::guard_calls::lease_state(self.nodes())
        }

        #[doc = concat!("How much longer, from now, this holder can be sure it holds ", $what, ": the time left on its lease (see [`state`](Self::state)). `None` when the state is not [`LockState::Held`](crate::LockState::Held); otherwise more than zero and less than the session timeout. Never blocks, sends nothing, sets no watch.")]
        ///
        /// It sees what [`lease_state`](Self::lease_state) sees (the lease; a deletion of the
        /// node by someone else only once a watch is set), at the same cost: none.
        ///
        /// The pattern for work that must not outlive the lock: before each step, check that
        /// the lease covers the time the step needs, and stop (or renew by waiting for
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
        pub fn lease_remaining(&self) -> Option<std::time::Duration> {
            $crate::recipes::guard_calls::lease_remaining(self.nodes())
        }

        #[doc = concat!("Blocks until ", $what, " is no longer [`LockState::Held`](crate::LockState::Held) and returns the new state: [`LockState::Suspended`](crate::LockState::Suspended) (connection in doubt: pause work on the resource) or [`LockState::Lost`](crate::LockState::Lost).")]
        ///
        /// Lets a holder learn of trouble without polling, for example from a watchdog thread
        /// that stops the work the lock protects; see [`wait_lost_with`](Self::wait_lost_with)
        /// for a watchdog its owner can end.
        pub fn wait_lost(&self) -> $crate::LockState {
            $crate::recipes::guard_calls::wait_lost(self.nodes(), &$crate::Wait::forever())
                .unwrap_or($crate::LockState::Lost)
        }

        /// As [`wait_lost`](Self::wait_lost), but gives up after `timeout` (monotonic clock)
        /// and returns `None` if the lock was still held all along.
        pub fn wait_lost_timeout(
            &self,
            timeout: std::time::Duration,
        ) -> Option<$crate::LockState> {
            self.wait_lost_with($crate::Wait::timeout(timeout))
        }

        /// As [`wait_lost`](Self::wait_lost), waiting as `wait` says: returns `None` once its
        /// timeout has passed or its token is cancelled (at once if it already is) while the
        /// lock is still held.
        ///
        /// For a watchdog thread that the guard's owner must end promptly before it releases
        /// the lock (the owner needs the guard back, which the watchdog borrows): cancel the
        /// token, join the thread, unlock. No polling interval delays the release.
        ///
        /// ```no_run
        /// # fn main() -> zklock::Result<()> {
        /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
        /// # let work = || ();
        /// use zklock::{CancelToken, Wait};
        /// let guard = zklock::DistributedMutex::new(&client, "/jobs/report")?.lock()?;
        /// let done = CancelToken::new();
        /// std::thread::scope(|s| {
        ///     s.spawn(|| {
        ///         if let Some(state) = guard.wait_lost_with(Wait::forever().cancel_on(&done)) {
        ///             eprintln!("lock {state:?}: stop the work");
        ///         }
        ///     });
        ///     work();
        ///     done.cancel(); // the watchdog returns at once
        /// });
        /// guard.unlock()?;
        /// # Ok(()) }
        /// ```
        pub fn wait_lost_with(&self, wait: $crate::Wait) -> Option<$crate::LockState> {
            $crate::recipes::guard_calls::wait_lost(self.nodes(), &wait)
        }

        /// As [`wait_lost`](Self::wait_lost), as a future: ready once the lock is no longer
        /// [`LockState::Held`](crate::LockState::Held), with the new state. It wakes on
        /// session changes and when the lease would run out (on the monotonic clock), so a
        /// stalled network thread cannot keep it pending. Cancel safe: dropping it stops
        /// nothing but the wait (so a runtime's timeout or a `select!` bounds it). Race it
        /// against the work the lock protects (`select!`) to stop that work when the lock is
        /// lost.
        pub async fn wait_lost_async(&self) -> $crate::LockState {
            $crate::recipes::guard_calls::wait_lost_async(self.nodes()).await
        }

        /// As [`wait_lost_with`](Self::wait_lost_with), as a future (`Send`, any executor):
        /// `None` once `wait`'s timeout or deadline passes (zklock's own timer) or its token
        /// is cancelled. Cancel safe, as [`wait_lost_async`](Self::wait_lost_async).
        pub async fn wait_lost_with_async(
            &self,
            wait: $crate::Wait,
        ) -> Option<$crate::LockState> {
            wait.race($crate::recipes::guard_calls::wait_lost_async(self.nodes()))
                .await
        }

        /// The fencing token to pass to a store outside ZooKeeper, so that it can refuse a
        /// stale holder's late writes: it increases from one holder of a lock to the next, also
        /// when the ensemble was re-created from scratch (see
        /// [`FencingToken`](crate::FencingToken) for the rule and its one assumption). Tokens
        /// compare only per lock path: the store keeps the highest token it has seen for each
        /// lock path (tokens of different lock paths are unrelated, and may be equal). Never
        /// blocks.
        ///
        #[doc = $fencing]
        pub fn fencing(&self) -> $crate::FencingToken {
            $crate::recipes::guard_calls::fencing(self.nodes())
        }

        /// The fencing token of every node the guard holds, in acquisition order (the first is
        /// [`fencing`](Self::fencing)). Never blocks.
        pub fn tokens(&self) -> Vec<$crate::FencingToken> {
            self.nodes().map($crate::core::held::Held::fencing).collect()
        }

        #[doc = concat!("The id of the session that holds ", $what, " (one session holds every node of a guard).")]
        pub fn session_id(&self) -> i64 {
            self.nodes().next().map_or(0, $crate::core::held::Held::session_id)
        }
    };
}
pub(crate) use guard_calls;
