//! The private waiting core shared by every recipe: create a protected ephemeral-sequential
//! node, find its position, wait on exactly the node that blocks it, and release.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

pub(crate) use crate::runtime::deadline_after;

use log::{debug, warn};

use crate::cancel::CancelToken;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::layout::{
    check_data_size, nodes_ahead, owner_data, protected_prefix, LockNode, LEASE_NAME,
};
use crate::listing::{list_shared, Children, Listed};
use crate::session::{Create, Liveness, NodeStat, Session};
use crate::token::FencingToken;
use crate::wait::{Attempt, Patience};
use crate::watch::OwnNodeWatch;
use crate::wire as zk;

/// What a recipe contributes to the core: its node naming, and who a contender waits for.
pub(crate) struct Kind {
    /// The name parts before the sequence number of every node kind sharing the queue, e.g.
    /// `["__READ__", "__WRIT__"]` (Curator's `lockName`s), with what each means.
    pub(crate) names: &'static [(&'static str, Role)],
    /// Which of `names` our node carries.
    pub(crate) ours: usize,
    /// Given the lock nodes ahead of ours, in order, the index of the one we must wait for,
    /// or `None` if we hold the lock. A rule looks at no node after the one it picks (those
    /// are nodes it lets pass), which [`sole_blocker`](Self::sole_blocker) relies on.
    pub(crate) blocker: fn(&[LockNode]) -> Option<usize>,
}

impl Kind {
    pub(crate) fn lock_names(&self) -> Vec<&'static str> {
        self.names.iter().map(|(name, _)| *name).collect()
    }

    /// Whether, with `blocker` gone, we would hold the lock. Sequence numbers only grow and our
    /// listing holds every node created before ours, so no new node can get in our way: the
    /// blocker's deletion alone then makes us the holder, without listing again (we only check
    /// that our own node still exists).
    pub(crate) fn sole_blocker(&self, ahead: &[LockNode], blocker: usize) -> bool {
        // Without the blocker, the rule would look at the nodes before it only.
        (self.blocker)(&ahead[..blocker]).is_none()
    }
}

/// The exclusive lock's rule (ZooKeeper's lock recipe): wait for the node just before ours.
pub(crate) fn previous_node(ahead: &[LockNode]) -> Option<usize> {
    ahead.len().checked_sub(1)
}

/// What a node in a lock's queue stands for, as reported by inspection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// A contender for an exclusive lock ([`DistributedMutex`](crate::DistributedMutex)).
    Exclusive,
    /// A reader of a [`DistributedRwLock`](crate::DistributedRwLock).
    Read,
    /// A writer of a [`DistributedRwLock`](crate::DistributedRwLock).
    Write,
    /// A lease of a [`Semaphore`](crate::Semaphore).
    Lease,
    /// A participant of a [`LeaderElection`](crate::LeaderElection).
    Participant,
}

/// Whether a held lock is still ours, as far as this process can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockState {
    /// Connected, session alive: the lock is held.
    Held,
    /// The connection is down or silent. The session may still be alive (the lock then comes
    /// back as `Held` on reconnect) or may be expiring, in which case another process can
    /// acquire the lock. Treat the lock as lost: stop touching the resource until `Held` again
    /// (Curator's rule for its SUSPENDED state).
    Suspended,
    /// The session expired or closed, or the node is gone: the lock is lost for good.
    Lost,
}

/// A node that holds a lock, released on drop.
pub(crate) struct Held {
    session: Arc<Session>,
    lock_path: String,
    node_path: String,
    stat: NodeStat,
    /// The lock path's creation time when our node was created in it (see [`FencingToken`]).
    generation: i64,
    /// Listens for our node's deletion by someone else (and, for revocable locks, for
    /// revocation requests). Set at the claim for revocable locks; otherwise the first time
    /// anyone asks for the lock's state, so that a caller who never asks pays nothing for it
    /// (a watch costs a request to set and one to remove before the release). Empty if it
    /// could not be set (the session was gone).
    own_node: OnceLock<Option<OwnNodeWatch>>,
    /// Made revocable: revocation requests are listened for (else ignored).
    revocable: bool,
    released: bool,
    /// Released in the background when dropped, never waiting: taken by an async call, the
    /// guard may be dropped on an async runtime's worker thread.
    pub(crate) background_drop: bool,
    /// What the acquisition's front end reports about this node (see `observe.rs`).
    pub(crate) track: crate::observe::Track,
}

impl Held {
    pub(crate) fn node_path(&self) -> &str {
        &self.node_path
    }

    pub(crate) fn fencing_token(&self) -> i64 {
        self.stat.czxid
    }

    pub(crate) fn fencing(&self) -> FencingToken {
        FencingToken::new(self.generation, self.stat.czxid)
    }

    pub(crate) fn session_id(&self) -> i64 {
        self.session.id
    }

    pub(crate) fn session_timeout(&self) -> Duration {
        self.session.timeout
    }

    /// Decided now, on the calling thread: `Held` only while the session is connected, our
    /// node is not known to be gone, and the lease has not run out (see `lease.rs`).
    pub(crate) fn state(&self) -> LockState {
        self.state_and_lease().0
    }

    /// The state, and with `Held` how much longer the lease runs; a loss seen is reported.
    fn state_and_lease(&self) -> (LockState, Option<Duration>) {
        let judged = self.judge();
        let deleted = self.own_node().is_some_and(OwnNodeWatch::deleted);
        self.track.observed(judged.0, &self.session, deleted);
        judged
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
        if self.watched().is_some_and(OwnNodeWatch::deleted) {
            return LockState::Lost;
        }
        self.judge_session().0
    }

    /// The watch on our node if it is set already (without setting it).
    fn watched(&self) -> Option<&OwnNodeWatch> {
        self.own_node.get().and_then(Option::as_ref)
    }

    fn judge(&self) -> (LockState, Option<Duration>) {
        if self.own_node().is_some_and(OwnNodeWatch::deleted) {
            return (LockState::Lost, None);
        }
        self.judge_session()
    }

    fn judge_session(&self) -> (LockState, Option<Duration>) {
        match self.session.liveness() {
            Liveness::Connected => match self.session.lease.remaining() {
                Some(left) => (LockState::Held, Some(left)),
                None => (LockState::Suspended, None),
            },
            Liveness::Disconnected => (LockState::Suspended, None),
            Liveness::Ended => (LockState::Lost, None),
        }
    }

    /// How much longer, from now, the holder can be sure it holds the lock; `None` unless
    /// `Held`.
    pub(crate) fn lease_remaining(&self) -> Option<Duration> {
        self.state_and_lease().1
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
        let _watching = cancel.map(|token| crate::cancel::watch([token]));
        let mut wait = std::pin::pin!(self.wait_not_held_async(deadline));
        crate::runtime::block_on(wait.as_mut(), None).unwrap_or(None)
    }

    /// As [`wait_not_held`](Self::wait_not_held), awaited (a cancellation is the future's
    /// drop, or a race with the token).
    pub(crate) async fn wait_not_held_async(&self, deadline: Option<Instant>) -> Option<LockState> {
        loop {
            let (state, lease) = self.state_and_lease();
            let Some(lease) = lease else {
                return Some(state);
            };
            if deadline.is_some_and(|d| Instant::now() >= d) || crate::cancel::interrupted() {
                return None;
            }
            // Look again when the lease would run out (renewals move it on), and, watching
            // our node too, between short waits.
            let mut step = deadline_after(lease);
            if self.own_node().is_some() {
                step = step.min(deadline_after(OWN_NODE_POLL));
            }
            let until = Some(deadline.map_or(step, |d| d.min(step)));
            self.session.wait_disconnected_async(until).await;
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

    /// Releases, for a caller who wants the outcome (`unlock`): deletes our node, waiting for
    /// the server's reply up to the session timeout; the background retry takes over after
    /// that.
    pub(crate) fn release(&mut self) -> Result<()> {
        self.release_within(self.session.timeout)
    }

    /// As [`release`](Self::release), blocking at most about `wait` in all (the background
    /// retry takes over after that). A delete not confirmed in time is
    /// [`Error::OutcomeUnknown`]: it may have been applied, or may be applied later.
    pub(crate) fn release_within(&mut self, wait: Duration) -> Result<()> {
        crate::session::blocking(self.release_within_async(wait))
    }

    /// As [`release_within`](Self::release_within), awaited. Dropped before the delete is
    /// confirmed, the release goes on in the background.
    pub(crate) async fn release_within_async(&mut self, wait: Duration) -> Result<()> {
        if self.released {
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
        let deleted = self.session.delete_node_async(&self.node_path, left).await;
        self.track.released(&deleted, &self.session);
        match deleted {
            Ok(true) => Ok(()),
            // Someone else deleted our node while we believed we held the lock.
            Ok(false) => Err(lost()),
            Err(Error::SessionExpired | Error::Closed) => Err(lost()),
            // `delete_node`'s word for "not confirmed in time, retried in the background",
            // whether the connection is down or the server merely slow: the caller cannot
            // know whether the lock is free yet, and the connection may be healthy.
            Err(Error::ConnectionLoss) => Err(Error::OutcomeUnknown {
                path: self.node_path.clone(),
            }),
            Err(err) => Err(err),
        }
    }

    /// Releases without waiting: the delete goes on in the background until the node is gone
    /// or the session has ended; `done` is dropped then.
    pub(crate) fn release_in_background(&mut self, done: impl Send + 'static) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        if let Some(watch) = self.own_node.take().flatten() {
            watch.stop_in_background();
        }
        // The hold ends with the release asked for; its outcome is the background's.
        self.track.released(&Ok(true), &self.session);
        if self.session.liveness() != Liveness::Ended {
            self.session.withdraw_in_background(&self.node_path, done);
        }
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
        crate::cancel::shielded(|| {
            let mut release = std::pin::pin!(self.release_logged(wait));
            let _ = crate::runtime::block_on(release.as_mut(), None);
        });
    }

    /// Releases, waiting at most about `wait`, and logs a failure instead of returning it.
    pub(crate) async fn release_logged(&mut self, wait: Duration) {
        match self.release_within_async(wait).await {
            Ok(()) => {}
            Err(err @ Error::OutcomeUnknown { .. }) => debug!(
                "release of {} (session {:#x}): {err}",
                self.node_path, self.session.id
            ),
            Err(err) if self.session.liveness() == Liveness::Ended => debug!(
                "release of {} (session {:#x}): {err}",
                self.node_path, self.session.id
            ),
            Err(err) => warn!(
                "release of {} (session {:#x}): {err}",
                self.node_path, self.session.id
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

/// The nodes an all-or-nothing acquisition (multi-lock, semaphore) has taken so far. Dropped
/// before it completes (an error, a timeout, or the future dropped), it releases them in the
/// background, in reverse order of taking; the acquisition's front end waits for that, as for
/// a withdrawn node (see [`Withdrawals`]).
pub(crate) struct Partial {
    held: Vec<Held>,
    withdrawals: Withdrawals,
}

impl Partial {
    pub(crate) fn new(attempt: &Attempt) -> Partial {
        Partial {
            held: Vec::new(),
            withdrawals: attempt.withdrawals.clone(),
        }
    }

    pub(crate) fn push(&mut self, held: Held) {
        self.held.push(held);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Everything was taken: the nodes, in the order taken, now for the caller to hold.
    pub(crate) fn complete(mut self) -> Vec<Held> {
        std::mem::take(&mut self.held)
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        while let Some(mut held) = self.held.pop() {
            debug!("releasing {} after a failed acquisition", held.node_path);
            // Waited for only on a live connection (see `OurNode`).
            let connected = held.session.liveness() == Liveness::Connected;
            held.release_in_background(connected.then(|| self.withdrawals.begin()));
        }
    }
}

/// Our node while we wait: withdrawn on every path that does not end holding the lock (an
/// error, a timeout, a cancellation, or the future being dropped at any await point).
struct OurNode {
    session: Arc<Session>,
    node_path: String,
    armed: bool,
    /// Told when the withdrawal is settled, for a caller who waits for it.
    withdrawals: Withdrawals,
}

impl Drop for OurNode {
    fn drop(&mut self) {
        if self.armed && self.session.liveness() != Liveness::Ended {
            // Never waits here: this may run on an async runtime's worker (a dropped future).
            // A caller that can wait (a blocking call, or an async call that returns) waits
            // for the settlement, briefly (see `Withdrawals`).
            debug!("withdrawing {}", self.node_path);
            // Waited for only on a live connection: during an outage no reply can come, and
            // the background delete goes on once the connection returns.
            let connected = self.session.liveness() == Liveness::Connected;
            let done = connected.then(|| self.withdrawals.begin());
            self.session.withdraw_in_background(&self.node_path, done);
        }
    }
}

/// The nodes an acquisition is withdrawing in the background, so that its front end can wait
/// until they are gone before returning (nothing is left behind on return, as far as the
/// server answers within a grace); a dropped future does not wait.
#[derive(Clone, Default)]
pub(crate) struct Withdrawals(Arc<WithdrawState>);

#[derive(Default)]
struct WithdrawState {
    pending: parking_lot::Mutex<usize>,
    settled: event_listener::Event,
}

/// One withdrawal in progress; settled when dropped.
pub(crate) struct Withdrawing(Withdrawals);

impl Withdrawals {
    pub(crate) fn begin(&self) -> Withdrawing {
        *self.0.pending.lock() += 1;
        Withdrawing(self.clone())
    }

    /// Waits until every withdrawal begun so far is settled, or `deadline`.
    pub(crate) async fn settled(&self, deadline: Instant) {
        loop {
            if *self.0.pending.lock() == 0 {
                return;
            }
            let listener = self.0.settled.listen();
            if *self.0.pending.lock() == 0 {
                return;
            }
            if crate::session::until(listener, Some(deadline))
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

impl Drop for Withdrawing {
    fn drop(&mut self) {
        let mut pending = (self.0).0.pending.lock();
        *pending -= 1;
        if *pending == 0 {
            (self.0).0.settled.notify(usize::MAX);
        }
    }
}

/// How often a holder waiting for trouble looks at its own node's deletion flag.
const OWN_NODE_POLL: Duration = Duration::from_millis(50);

/// How long a contender that gives up waits for the delete of its node to be confirmed.
pub(crate) const WITHDRAW_WAIT: Duration = Duration::from_secs(1);

/// The same for a cancelled (or closed) acquisition; the background retry finishes the job.
pub(crate) const CANCEL_WITHDRAW_WAIT: Duration = Duration::from_millis(200);

/// How many times a missing lock path is created before giving up (a racing container reaper
/// can delete an empty parent between our mkdir and our create).
const PARENT_ATTEMPTS: u32 = 5;

/// How many creates in a row may go unanswered (connection lost, nothing created) before the
/// acquisition gives up with [`Error::ConnectionLoss`] instead of retrying for ever.
const UNANSWERED_CREATES: u32 = 10;

/// Acquires `lock_path` as a contender of `kind`. `Ok(None)` when the lock was busy and the
/// patience ran out; nothing is left behind on any path that does not return `Ok(Some(..))`.
pub(crate) async fn acquire(
    client: &Client,
    lock_path: &str,
    kind: &Kind,
    attempt: &Attempt,
    options: &Options,
) -> Result<Option<Held>> {
    let deadline = attempt.deadline(client);
    let session = Box::pin(client.session_async(deadline)).await?;
    acquire_on(&session, lock_path, kind, attempt, deadline, options).await
}

/// As [`acquire`], on a given session: every step of an acquisition made of several nodes
/// (a multi-lock's members, a semaphore's gate and leases) must use one session, so that an
/// expiry between two steps fails the whole acquisition instead of mixing a lost node with
/// fresh ones.
pub(crate) async fn acquire_on(
    session: &Arc<Session>,
    lock_path: &str,
    kind: &Kind,
    attempt: &Attempt,
    deadline: Option<Instant>,
    options: &Options,
) -> Result<Option<Held>> {
    let data = options.data.clone().unwrap_or_else(owner_data);
    check_data_size(&data)?;
    let contended = contend(session, lock_path, kind, attempt, deadline, &data).await;
    let held = past_deadline_is_busy(session, deadline, contended)?;
    let Some(mut held) = held else {
        return Ok(None);
    };
    if options.revocable {
        let watch = session.watch_own_node(&held.node_path)?;
        held.own_node = OnceLock::from(Some(watch));
        held.revocable = true;
    }
    Ok(Some(held))
}

/// Per-acquisition choices of a recipe.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Listen for revocation requests while held.
    pub(crate) revocable: bool,
    /// The node's data; [`owner_data`] if `None`.
    pub(crate) data: Option<Vec<u8>>,
}

/// The outcome of an acquisition's requests, with a request that ran into the deadline on a
/// live connection (a slow reply, or one that was simply still on its way when the time ran
/// out) read as a timeout, not an outage: the session layer reports every wait that reached
/// its deadline as [`Error::ConnectionLoss`], whatever the connection's state. Every
/// acquisition front end (`acquire_on`, `acquire_lease`) passes its outcome through here.
fn past_deadline_is_busy(
    session: &Session,
    deadline: Option<Instant>,
    outcome: Result<Option<Held>>,
) -> Result<Option<Held>> {
    match outcome {
        Err(Error::ConnectionLoss) if deadline.is_some_and(|d| Instant::now() >= d) => {
            gave_up(session)
        }
        outcome => outcome,
    }
}

/// After the deadline: during an outage the caller learns that the lock could not be decided,
/// not that it is busy. A wait stopped by cancellation or by closing the client says so.
fn gave_up(session: &Session) -> Result<Option<Held>> {
    if let Some(stopped) = crate::cancel::interruption() {
        return Err(stopped);
    }
    if session.liveness() == Liveness::Connected {
        Ok(None)
    } else {
        Err(Error::ConnectionLoss)
    }
}

async fn contend(
    session: &Arc<Session>,
    lock_path: &str,
    kind: &Kind,
    attempt: &Attempt,
    deadline: Option<Instant>,
    data: &[u8],
) -> Result<Option<Held>> {
    let lock_name = kind.names[kind.ours].0;
    // The steps before and between waits are boxed: a future is as large as its largest
    // state, and ten thousand waiting tasks should each hold only the wait's.
    let created = Box::pin(create_node(
        session, lock_path, lock_name, data, attempt, deadline,
    ))
    .await?;
    let Some(Created {
        mut contender,
        name,
        stat,
        children,
        generation,
    }) = created
    else {
        return gave_up(session);
    };
    let lock_names = kind.lock_names();
    // (A name of ours that is no lock node would be missing from every listing.)
    let Some(ours) = LockNode::parse(name, &lock_names) else {
        return Err(node_vanished(&mut contender, lock_path));
    };
    // The nodes ahead of ours, as the listing taken with the create shows them.
    let mut known: Option<Option<Ahead>> = Some(Ahead::of(&ours, &children, &lock_names));
    drop(children);
    // Set when woken by a reconnect: the listing may be shared with the session's other
    // waiters woken by it, if asked for since (see `listing.rs`).
    let mut shared_since: Option<Instant> = None;
    loop {
        let ahead = match (known.take(), shared_since.take()) {
            (Some(ahead), _) => ahead,
            (None, Some(since)) => {
                let listed = Box::pin(list_shared(session, lock_path, deadline, since)).await?;
                Ahead::of(&ours, &listed, &lock_names)
            }
            (None, None) => {
                let listed = Box::pin(session.list_async(lock_path, deadline)).await?;
                nodes_ahead(&listed, &ours, &lock_names).map(Ahead::own)
            }
        };
        let Some(ahead) = ahead else {
            return Err(node_vanished(&mut contender, lock_path));
        };
        let Some(blocker) = (kind.blocker)(&ahead) else {
            return claim(contender, lock_path, stat, generation).map(Some);
        };
        if let Patience::DontWait = attempt.patience {
            return Ok(None);
        }
        let sole_blocker = kind.sole_blocker(&ahead, blocker);
        let blocker_path = format!("{lock_path}/{}", ahead[blocker].name);
        // The queue ahead can be long and the wait too: with many waiters, keeping each one's
        // copy alive grows memory with the square of the queue.
        drop(ahead);
        let watcher = match Box::pin(session.watch_node_async(&blocker_path, deadline)).await {
            Ok(Some(watcher)) => watcher,
            Ok(None) => continue, // Gone already: re-list at once.
            Err(Error::ConnectionLoss) => return gave_up(session),
            Err(err) => return Err(err),
        };
        debug!("{} waits for {blocker_path}", contender.node_path);
        let woken = Box::pin(wait_for_change(session, watcher, &mut contender, deadline)).await?;
        match woken {
            Woken::Deleted if sole_blocker && session.liveness() == Liveness::Connected => {
                // No listing needed (nothing can be ahead of us now), but our own node must
                // still be there: someone may have deleted it while we waited. Reading one
                // node is cheaper than listing a long queue.
                let own = Box::pin(session.get_data_async(&contender.node_path, deadline)).await?;
                match own {
                    Some((_, now)) if now.czxid == stat.czxid => {
                        return claim(contender, lock_path, stat, generation).map(Some)
                    }
                    _ => return Err(node_vanished(&mut contender, lock_path)),
                }
            }
            Woken::Deleted | Woken::Recheck => {}
            Woken::Reconnected { since } => shared_since = Some(since),
            Woken::TimedOut => return gave_up(session),
        }
    }
}

/// The lock nodes ahead of ours, in queue order: a view into a listing's sorted nodes, which
/// every waiter that read the listing shares (a wave of ten thousand waiters woken by one
/// listing sorts it once, not once each).
struct Ahead {
    nodes: Arc<Vec<LockNode>>,
    end: usize,
}

impl Ahead {
    /// The nodes ahead of `ours` in `listed`; `None` if `ours` is not in it.
    fn of(ours: &LockNode, listed: &Children, lock_names: &[&'static str]) -> Option<Ahead> {
        let nodes = listed.sorted(lock_names);
        let end = nodes
            .iter()
            .position(|n| n.sequence == ours.sequence && n.name == ours.name)?;
        Some(Ahead { nodes, end })
    }

    /// Nodes ahead found by this waiter alone.
    fn own(ahead: Vec<LockNode>) -> Ahead {
        let end = ahead.len();
        Ahead {
            nodes: Arc::new(ahead),
            end,
        }
    }
}

impl std::ops::Deref for Ahead {
    type Target = [LockNode];

    fn deref(&self) -> &[LockNode] {
        &self.nodes[..self.end]
    }
}

/// Takes one lease under `leases_path` of a semaphore with `permits` leases, Curator's
/// `InterProcessSemaphoreV2` way: create a lease node, then wait until at most `permits` lease
/// nodes exist. The caller serialises lease takers with the semaphore's internal mutex, so only
/// one of them watches the leases at a time.
pub(crate) async fn acquire_lease(
    session: &Arc<Session>,
    leases_path: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held>> {
    let taken = take_lease(session, leases_path, permits, attempt, deadline).await;
    past_deadline_is_busy(session, deadline, taken)
}

/// The steps of [`acquire_lease`], whose errors it has yet to sort.
async fn take_lease(
    session: &Arc<Session>,
    leases_path: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held>> {
    let data = owner_data();
    let created = Box::pin(create_node(
        session,
        leases_path,
        LEASE_NAME,
        &data,
        attempt,
        deadline,
    ))
    .await?;
    let Some(Created {
        mut contender,
        name,
        stat,
        children,
        generation,
    }) = created
    else {
        return gave_up(session);
    };
    let admitted = |children: &[String], contender: &mut OurNode| {
        if children.contains(&name) {
            Ok(children.len() <= permits)
        } else {
            Err(node_vanished(contender, leases_path))
        }
    };
    let mut children = Some(children);
    loop {
        let listed = match children.take() {
            Some(children) => children,
            None => {
                let listed = Box::pin(session.list_with_stat_async(leases_path, deadline));
                let (names, stat) = listed.await?;
                Children::new(names, stat)
            }
        };
        if admitted(&listed.names, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        if let Patience::DontWait = attempt.patience {
            return Ok(None);
        }
        let watching = Box::pin(session.watch_children_async(leases_path, deadline));
        let (listed, watcher) = match watching.await {
            Ok(watched) => watched,
            Err(Error::ConnectionLoss) => return gave_up(session),
            Err(err) => return Err(err),
        };
        if admitted(&listed, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        drop(listed);
        let woken = wait_for_change(session, watcher, &mut contender, deadline).await?;
        if let Woken::TimedOut = woken {
            return gave_up(session);
        }
    }
}

/// Our freshly created node, deleted on drop unless claimed.
struct Created {
    contender: OurNode,
    name: String,
    stat: NodeStat,
    /// A listing of the lock path sent after the create (with the lock path's stat).
    children: Listed,
    /// The lock path's creation time: the generation of our fencing token.
    generation: i64,
}

/// Creates our protected ephemeral-sequential node `<uuid-prefix><lock_name><seq>` under
/// `lock_path` (creating the path if needed), surviving a lost reply without ever leaving two
/// nodes. `None` if the deadline passed first; a node created late is then deleted in the
/// background.
async fn create_node(
    session: &Arc<Session>,
    lock_path: &str,
    lock_name: &str,
    data: &[u8],
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Created>> {
    let prefix = format!("{}{lock_name}", protected_prefix(&uuid::Uuid::new_v4()));
    let placed = place_node(session.as_ref(), lock_path, &prefix, data, deadline).await?;
    let Some((name, stat, children, parent)) = placed else {
        return Ok(None);
    };
    let node_path = format!("{lock_path}/{name}");
    debug!("created {node_path} (session {:#x})", session.id);
    let mut contender = OurNode {
        session: session.clone(),
        node_path,
        armed: true,
        withdrawals: attempt.withdrawals.clone(),
    };
    let children = match (children, parent) {
        (Some(children), Some(parent)) => Children::new(children, parent),
        // No listing came with the create (other creates were in flight on the session, the
        // listing was lost, or the create's reply was, and the node was found by its prefix):
        // one sent after the create was answered, shared with the session's other creates.
        _ => list_shared(session, lock_path, deadline, Instant::now()).await?,
    };
    // While our node exists the lock path cannot be re-created; one created after our node
    // means ours is gone already.
    if children.stat.czxid >= stat.czxid {
        return Err(node_vanished(&mut contender, lock_path));
    }
    let generation = children.stat.ctime;
    Ok(Some(Created {
        contender,
        name,
        stat,
        children,
        generation,
    }))
}

/// The session operations that place our node in a queue: the seam between the waiting
/// core's decisions and ZooKeeper, so that unit tests can drive every outcome of a create.
pub(crate) trait NodeStore: Sync {
    /// See [`Session::create_lock_node`].
    fn create(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Create>> + Send;
    fn wait_connected(&self, deadline: Option<Instant>) -> impl Future<Output = Result<()>> + Send;
    fn sync(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<()>> + Send;
    fn list(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    fn stat(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Option<NodeStat>>> + Send;
    fn ensure_path(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Deletes, in the background, every child of `lock_path` starting with `prefix`.
    fn sweep(&self, lock_path: &str, prefix: &str);
}

impl NodeStore for Session {
    async fn create(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Create> {
        self.create_lock_node_async(lock_path, prefix, data, deadline)
            .await
    }
    async fn wait_connected(&self, deadline: Option<Instant>) -> Result<()> {
        self.wait_connected_async(deadline).await
    }
    async fn sync(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.sync_async(path, deadline).await
    }
    async fn list(&self, path: &str, deadline: Option<Instant>) -> Result<Vec<String>> {
        self.list_async(path, deadline).await
    }
    async fn stat(&self, path: &str, deadline: Option<Instant>) -> Result<Option<NodeStat>> {
        Ok(self
            .get_data_async(path, deadline)
            .await?
            .map(|(_, stat)| stat))
    }
    async fn ensure_path(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.ensure_path_async(path, deadline).await
    }
    fn sweep(&self, lock_path: &str, prefix: &str) {
        self.sweep_in_background(lock_path, prefix);
    }
}

/// Our node's name and stat, the listing it was found in, and the lock path's stat from that
/// listing's reply.
type FoundNode = (String, NodeStat, Option<Vec<String>>, Option<NodeStat>);

/// The decisions of [`create_node`]: creates a node named `prefix` + sequence, looking for it
/// by its unique prefix after a lost reply instead of creating a second one, recreating a
/// missing lock path a few times, and giving up on a create the server keeps dropping.
async fn place_node(
    store: &impl NodeStore,
    lock_path: &str,
    prefix: &str,
    data: &[u8],
    deadline: Option<Instant>,
) -> Result<Option<FoundNode>> {
    let (mut parent_attempts, mut unanswered) = (0, 0);
    loop {
        match store.create(lock_path, prefix, data, deadline).await? {
            Create::Created {
                name,
                stat,
                children,
                parent,
            } => return Ok(Some((name, stat, children, parent))),
            Create::TimedOut => return Ok(None),
            Create::Unknown => {
                // The reply was lost: look for the node by its unique prefix before creating
                // again, so there is never a second node of ours.
                if let Some(found) = find_created(store, lock_path, prefix, deadline).await? {
                    return Ok(Some(found));
                }
                // A create the server keeps dropping the connection over is not an outage.
                unanswered += 1;
                if unanswered >= UNANSWERED_CREATES {
                    store.sweep(lock_path, prefix);
                    return Err(Error::ConnectionLoss);
                }
            }
            Create::ParentMissing if parent_attempts < PARENT_ATTEMPTS => {
                parent_attempts += 1;
                store.ensure_path(lock_path, deadline).await?;
            }
            Create::ParentMissing => {
                warn!("{lock_path} keeps disappearing while we create our node in it");
                return Err(Error::NoNode {
                    path: lock_path.to_owned(),
                });
            }
        }
    }
}

/// After a create whose reply was lost: our node by its prefix, if the create executed. On any
/// error, or if dropped meanwhile, the prefix is swept in the background, so a late node
/// cannot linger.
async fn find_created(
    store: &impl NodeStore,
    lock_path: &str,
    prefix: &str,
    deadline: Option<Instant>,
) -> Result<Option<FoundNode>> {
    /// Sweeps the prefix unless disarmed.
    struct SweepUnlessFound<'a, S: NodeStore>(&'a S, &'a str, &'a str, bool);
    impl<S: NodeStore> Drop for SweepUnlessFound<'_, S> {
        fn drop(&mut self) {
            if self.3 {
                self.0.sweep(self.1, self.2);
            }
        }
    }
    let mut sweep = SweepUnlessFound(store, lock_path, prefix, true);
    store.wait_connected(deadline).await?;
    // We may be talking to another server now, one that has not yet applied our create:
    // without the sync its listing could miss our node, and we would create a second one
    // that waits for ever behind the first.
    store.sync(lock_path, deadline).await?;
    let children = store.list(lock_path, deadline).await?;
    let Some(found) = children.iter().find(|c| c.starts_with(prefix)).cloned() else {
        sweep.3 = false;
        return Ok(None);
    };
    let path = format!("{lock_path}/{found}");
    // `None`: gone again (session trouble); the caller creates anew.
    let stat = store.stat(&path, deadline).await?;
    sweep.3 = false;
    Ok(stat.map(|stat| {
        debug!("found {path} after a lost create reply");
        (found, stat, Some(children), None)
    }))
}

/// Our node is missing from the listing: only our session's end or someone deleting it by
/// hand removes it.
fn node_vanished(contender: &mut OurNode, lock_path: &str) -> Error {
    contender.armed = false;
    match contender.session.liveness() {
        Liveness::Ended => Error::SessionExpired,
        _ => Error::LockLost {
            path: lock_path.to_owned(),
        },
    }
}

/// Why a wait for a watched node ended.
enum Woken {
    Deleted,
    /// The node changed: look again.
    Recheck,
    /// The connection came back: look again, with a listing asked for no earlier than
    /// `since` (when this waiter first found the session disconnected, or else began
    /// waiting): one asked for after that was sent after the outage began, and so is
    /// answered once the connection is back.
    Reconnected {
        since: Instant,
    },
    TimedOut,
}

/// What woke a waiter, as [`wait_for_change`] races its sources.
enum Wake {
    Node(zk::EventType),
    Session,
    Deadline,
}

/// Waits for `watcher` to fire, a reconnect, or the deadline. Session end is an error (and
/// disarms `contender`: the server already removed the node). Dropping the watcher (on
/// return, or when the future is dropped) removes the watch from the server.
async fn wait_for_change(
    session: &Session,
    watcher: zk::OneshotWatcher,
    contender: &mut OurNode,
    deadline: Option<Instant>,
) -> Result<Woken> {
    let mut since = Instant::now();
    let mut disconnected_seen = false;
    let mut state = session.state_watcher();
    let mut fired = std::pin::pin!(watcher.changed());
    let mut timer = deadline.map(crate::runtime::sleep_until);
    // A state change may have slipped in before the watch was set: if not connected now,
    // start with a session change pending.
    let mut session_changed = session.liveness() != Liveness::Connected;
    loop {
        let wake = if std::mem::take(&mut session_changed) {
            Wake::Session
        } else {
            let mut changed = std::pin::pin!(state.changed());
            std::future::poll_fn(|cx| {
                if let Poll::Ready(event) = fired.as_mut().poll(cx) {
                    return Poll::Ready(Wake::Node(event.event_type));
                }
                if changed.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Wake::Session);
                }
                match timer.as_mut().map(|t| Pin::new(t).poll(cx)) {
                    Some(Poll::Ready(())) => Poll::Ready(Wake::Deadline),
                    _ => Poll::Pending,
                }
            })
            .await
        };
        match wake {
            Wake::Node(zk::EventType::NodeDeleted) => return Ok(Woken::Deleted),
            Wake::Node(zk::EventType::Session) => break,
            Wake::Node(_) => return Ok(Woken::Recheck),
            Wake::Session => match session.liveness() {
                Liveness::Ended => break,
                // Reconnected: watches are re-armed, but re-check rather than trust that a
                // deletion during the outage was delivered.
                Liveness::Connected => return Ok(Woken::Reconnected { since }),
                Liveness::Disconnected => {
                    if !disconnected_seen {
                        disconnected_seen = true;
                        since = Instant::now();
                    }
                    debug!("{}: connection lost while waiting", contender.node_path)
                }
            },
            Wake::Deadline => return Ok(Woken::TimedOut),
        }
    }
    contender.armed = false;
    // The session ended: expired, or closed by us (a close also cancels, and the waiter may
    // see the session's end before the cancellation): say which.
    Err(crate::cancel::interruption().unwrap_or_else(|| session.ended_error()))
}

fn claim(mut contender: OurNode, lock_path: &str, stat: NodeStat, generation: i64) -> Result<Held> {
    let session = contender.session.clone();
    // The node must belong to the session we hold it through (Curator once granted a lock on
    // a stale read that did not).
    if stat.ephemeral_owner != session.id {
        return Err(Error::LockLost {
            path: lock_path.to_owned(),
        });
    }
    contender.armed = false;
    Ok(Held {
        session,
        lock_path: lock_path.to_owned(),
        node_path: std::mem::take(&mut contender.node_path),
        stat,
        generation,
        own_node: OnceLock::new(),
        revocable: false,
        released: false,
        background_drop: false,
        track: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    //! The waiting core's decisions about placing our node, driven through [`NodeStore`] by
    //! an in-memory store that scripts each create's outcome (the integration tests prove the
    //! same against a real server, with real faults, in seconds rather than milliseconds).

    use std::collections::VecDeque;

    use parking_lot::Mutex as RefCell;

    use super::*;

    /// What the next create does.
    #[derive(Clone, Copy)]
    enum Step {
        /// Creates the node and answers.
        Apply,
        /// Creates the node, but the reply is lost.
        ApplyLost,
        /// Nothing is created and the reply is lost.
        Lost,
        TimedOut,
        ParentMissing,
    }

    #[derive(Default)]
    struct MemoryStore {
        steps: RefCell<VecDeque<Step>>,
        children: RefCell<Vec<String>>,
        calls: RefCell<Vec<&'static str>>,
        swept: RefCell<Vec<String>>,
        fail_listing: bool,
        sequence: RefCell<u32>,
    }

    impl MemoryStore {
        fn scripted(steps: &[Step]) -> MemoryStore {
            MemoryStore {
                steps: RefCell::new(steps.iter().copied().collect()),
                ..MemoryStore::default()
            }
        }

        fn stat() -> NodeStat {
            NodeStat {
                czxid: 7,
                ephemeral_owner: 1,
                ctime: 0,
                version: 0,
            }
        }

        fn add(&self, prefix: &str) -> String {
            let mut sequence = self.sequence.lock();
            let name = format!("{prefix}{:010}", *sequence);
            *sequence += 1;
            self.children.lock().push(name.clone());
            name
        }

        fn calls(&self) -> Vec<&'static str> {
            self.calls.lock().clone()
        }
    }

    impl NodeStore for MemoryStore {
        async fn create(
            &self,
            _: &str,
            prefix: &str,
            _: &[u8],
            _: Option<Instant>,
        ) -> Result<Create> {
            self.calls.lock().push("create");
            let step = self.steps.lock().pop_front().unwrap_or(Step::Apply);
            Ok(match step {
                Step::Apply => Create::Created {
                    name: self.add(prefix),
                    stat: MemoryStore::stat(),
                    children: Some(self.children.lock().clone()),
                    parent: Some(MemoryStore::stat()),
                },
                Step::ApplyLost => {
                    self.add(prefix);
                    Create::Unknown
                }
                Step::Lost => Create::Unknown,
                Step::TimedOut => Create::TimedOut,
                Step::ParentMissing => Create::ParentMissing,
            })
        }
        async fn wait_connected(&self, _: Option<Instant>) -> Result<()> {
            Ok(())
        }
        async fn sync(&self, _: &str, _: Option<Instant>) -> Result<()> {
            self.calls.lock().push("sync");
            Ok(())
        }
        async fn list(&self, _: &str, _: Option<Instant>) -> Result<Vec<String>> {
            self.calls.lock().push("list");
            if self.fail_listing {
                return Err(Error::ConnectionLoss);
            }
            Ok(self.children.lock().clone())
        }
        async fn stat(&self, path: &str, _: Option<Instant>) -> Result<Option<NodeStat>> {
            let name = path.rsplit('/').next().unwrap_or_default();
            Ok(self
                .children
                .lock()
                .iter()
                .any(|c| c == name)
                .then(MemoryStore::stat))
        }
        async fn ensure_path(&self, _: &str, _: Option<Instant>) -> Result<()> {
            self.calls.lock().push("ensure_path");
            Ok(())
        }
        fn sweep(&self, _: &str, prefix: &str) {
            self.swept.lock().push(prefix.to_owned());
        }
    }

    fn place(store: &MemoryStore) -> Result<Option<FoundNode>> {
        let mut placing = std::pin::pin!(place_node(store, "/lock", "_c_1-lock-", b"", None));
        crate::runtime::block_on(placing.as_mut(), None).unwrap_or(Err(Error::ConnectionLoss))
    }

    #[test]
    fn a_lost_reply_to_an_executed_create_finds_the_node_after_a_sync() {
        let store = MemoryStore::scripted(&[Step::ApplyLost]);
        let (name, _, children, _) = place(&store).unwrap().expect("placed");
        assert_eq!(name, "_c_1-lock-0000000000");
        assert_eq!(store.children.lock().len(), 1, "never created twice");
        assert_eq!(children.unwrap(), [name]);
        assert_eq!(store.calls(), ["create", "sync", "list"]);
    }

    #[test]
    fn a_lost_create_that_never_executed_is_sent_again() {
        let store = MemoryStore::scripted(&[Step::Lost, Step::Lost, Step::Apply]);
        let (name, _, _, _) = place(&store).unwrap().expect("placed");
        assert_eq!(store.children.lock().as_slice(), [name]);
        let creates = store.calls().iter().filter(|c| **c == "create").count();
        assert_eq!(creates, 3);
    }

    #[test]
    fn a_create_that_is_never_answered_gives_up_and_sweeps() {
        let store = MemoryStore::scripted(&[Step::Lost; UNANSWERED_CREATES as usize]);
        assert!(matches!(place(&store), Err(Error::ConnectionLoss)));
        assert_eq!(store.swept.lock().as_slice(), ["_c_1-lock-"]);
    }

    #[test]
    fn a_missing_lock_path_is_created_a_few_times_then_reported() {
        let store = MemoryStore::scripted(&[Step::ParentMissing, Step::Apply]);
        assert!(place(&store).unwrap().is_some());
        assert_eq!(store.calls(), ["create", "ensure_path", "create"]);

        let store = MemoryStore::scripted(&[Step::ParentMissing; 1 + PARENT_ATTEMPTS as usize]);
        assert!(matches!(place(&store), Err(Error::NoNode { .. })));
        let ensures = store
            .calls()
            .iter()
            .filter(|c| **c == "ensure_path")
            .count();
        assert_eq!(ensures, PARENT_ATTEMPTS as usize);
    }

    #[test]
    fn a_create_past_its_deadline_is_left_to_the_background() {
        let store = MemoryStore::scripted(&[Step::TimedOut]);
        assert!(place(&store).unwrap().is_none());
    }

    #[test]
    fn a_failed_lookup_sweeps_whatever_the_create_may_have_left() {
        let store = MemoryStore {
            fail_listing: true,
            ..MemoryStore::scripted(&[Step::ApplyLost])
        };
        assert!(matches!(place(&store), Err(Error::ConnectionLoss)));
        assert_eq!(store.swept.lock().as_slice(), ["_c_1-lock-"]);
    }
}
