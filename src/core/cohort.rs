//! Local handoff: the callers of one client on one lock path queue in this process
//! behind one lock node, and a releasing holder passes the node to the next local caller
//! without the server, as long as that is safe and fair to other processes.
//!
//! A [`Cohort`] is the local queue of one (client, lock path, kind of node). Its callers wait
//! on it in FIFO order; when nobody here holds or queues a node, the first caller's poll starts
//! one *contention* (the ordinary acquisition of the core) on behalf of all of them, and
//! whichever caller is polled drives it: no task of its own, so it runs on any executor,
//! blocking and async callers mixed, and in the deterministic simulation. The node it claims
//! goes to the first caller in the queue.
//!
//! # The bound on other processes
//!
//! The holds of one node are numbered from 1 (its claim's). Hold `n` may begin only if
//! `n <= clear + batch`, where `clear` is the number of holds begun when the latest *check*
//! that found no other node was sent (0 at the claim). A check is one listing of the lock
//! path's children, without a watch. A node another process creates after the server
//! answered that listing is absent from it, and once created it is in every later one; so
//! when it is created at least `clear` holds had begun, and at most `batch` more begin before
//! the node is released through the server, however late any reply or notification is read.
//! (A node created earlier waits at most the `batch` holds counted from the claim.) The
//! count is the server's order, not the time a notification happened to be read: a
//! notification read late let a process wait hundreds of holds.
//!
//! A check is sent at the claim, and while none has found another node, one every
//! `batch / 2` holds (at least every hold), so that a process alone runs on while they
//! travel. Each check costs the server a request (about 150 µs of its CPU on the 2-core test
//! machine, taken from the holders when both cores are busy): every `batch / 4` holds made a
//! 10,000-task drain slower than every `batch / 2`, and the claim's check lets a batch under
//! contention end without waiting for an answer. When the next hold is not allowed yet and a
//! check is on its way, the node is *parked* (held by no caller) until an answer comes: the
//! front waiter reads it and takes the node if it allows, or releases the node through the
//! server if a check found another node. Once one has, no more are sent, and the node goes
//! through the server after the holds still allowed.
//!
//! A holder's release ([`Cohort::release`]) hands the node to the next local caller only if
//! - a local caller waits;
//! - the next hold is allowed by the bound above;
//! - no check found our own node missing from the listing (deleted by someone else);
//! - the node may be passed on at this instant ([`LocalNode::may_hand_on`]: its lease reads
//!   `Held`, it is not known to be deleted, no revocation was requested);
//! - fewer than `u16::MAX` handoffs happened on this node (the fencing token's local number).
//!
//! # The end of a batch
//!
//! A node deleted by someone else (an operator breaking the lock) must not be passed on: the
//! lock may be another process's already. The node is watched from its claim
//! ([`LocalNode::claimed`]: the own-node watch of a guard, set once per node, not per hold),
//! so its deletion is known from the notification, or from the watch's read failing; and a
//! check whose listing lacks our node says the same. From then on no hold of it begins: the
//! batch ends at once, the node's holder reads `Lost` and its release goes through the
//! server (which finds the node gone: `LockLost`), and the local callers queue a fresh node.
//!
//! A batch whose session ends (expired, or the client closed) ends too, and every local
//! caller waiting for it gets the session's error at once, as it would waiting on the server
//! for a node of its own: a waiter must not sit behind a holder that lost the lock, nor be
//! given a node of a session that is gone. The waiters watch the session of the batch's
//! node, not their own (a caller arriving after an expiry has a new session).
//!
//! Otherwise the node is released through the server as without local handoff, and the local
//! callers still waiting start a new contention: their new node queues behind every process
//! that waited meanwhile.
//!
//! A caller that leaves (timeout, cancellation, a dropped future) only leaves the local queue;
//! the last one to leave drops the contention, which withdraws the node, or releases a parked
//! node. A node handed to a caller that left before it saw it is passed on (or released) by
//! that caller's drop.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::Result;
use crate::metrics::{self, Recipe};

use crate::error::Error;

use super::seam::{NodeStore, ZkSession};
use super::session_view::{Elapsed, Liveness};
use super::withdraw::Withdrawals;

/// What a check's listing found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// No node but ours.
    Alone,
    /// Another node besides ours (or no answer).
    Others,
    /// Our node is not in the listing: deleted by someone else.
    Gone,
}

impl Checked {
    /// What a listing of the lock path's children `names` says of our node `ours`.
    pub(crate) fn of(names: &[String], ours: &str) -> Checked {
        if !names.iter().any(|name| name == ours) {
            Checked::Gone
        } else if names.len() == 1 {
            Checked::Alone
        } else {
            Checked::Others
        }
    }
}

/// A check on its way: a listing of the lock path sent when it was made.
pub(crate) type Check = Pin<Box<dyn Future<Output = Checked> + Send>>;

/// Resolves, with the error a waiter on the server would get, once the session of a claimed
/// node has ended.
pub(crate) type Ended = Pin<Box<dyn Future<Output = Error> + Send>>;

/// The end of `session`, as a waiter in the core sees it (see [`Ended`]).
pub(crate) fn ended<S: ZkSession>(session: Arc<S>) -> Ended {
    Box::pin(async move {
        let mut states = session.states();
        while session.liveness() != Liveness::Ended {
            S::state_changed(&mut states).await;
        }
        session.ended_error()
    })
}

/// Sends a check of the node claimed (see the module docs) when called.
pub(crate) type Checker = Box<dyn FnMut() -> Check + Send>;

/// What a contention yields: the node, how to check that no other node is queued, and the
/// end of its session.
pub(crate) struct Claim<N> {
    pub(crate) node: N,
    pub(crate) checks: Checker,
    pub(crate) ended: Ended,
}

/// One acquisition of a node for the local queue.
pub(crate) type Contention<N> = Pin<Box<dyn Future<Output = Result<Option<Claim<N>>>> + Send>>;

/// A held node that can be passed from one local holder to the next.
pub(crate) trait LocalNode: Send + Sized + 'static {
    /// Whether the node may be passed on now: its lease reads `Held` at this instant, it is
    /// not known to be deleted, and no revocation was requested.
    fn may_hand_on(&self) -> bool;
    /// How many times the node was passed on before this holder.
    fn local(&self) -> u16;
    /// The node for the next local holder (numbered one higher); `self` is spent and releases
    /// nothing.
    fn hand_on(&mut self) -> Self;
    /// Makes the node's release go through `cohort`.
    fn join(&mut self, cohort: Arc<Cohort<Self>>);
    /// Makes the node's release go through the server, not its cohort.
    fn leave(&mut self);
    /// A hold of the node begins now (it is given to a local caller).
    fn begins(&mut self) {}
    /// The node was claimed for the local queue: from now on its deletion by someone else
    /// must be learnt without anyone asking (see the module docs).
    fn claimed(&mut self);
    /// The node's path: which batch it is the node of.
    fn path(&self) -> &str;
    /// Releases the node through the server in the background (it has left its cohort);
    /// registered with `withdrawals` while the connection is up, as a withdrawn node is.
    fn withdraw(self, withdrawals: &Withdrawals);
    /// Why the node's session ended, once it has.
    fn session_ended(&self) -> Option<Error>;
}

/// What a holder's release comes to.
pub(crate) enum Release {
    /// Passed to the next local caller, or parked for one: nothing to send.
    Handed,
    /// Release the node through the server, as without local handoff.
    Server,
}

/// The local queue of one lock path, kind of node and client.
pub(crate) struct Cohort<N> {
    /// Local holds allowed past the latest clear check (at least 1).
    batch: u32,
    /// Holds between two checks.
    step: u32,
    /// For the metrics.
    recipe: Recipe,
    state: Mutex<State<N>>,
    /// The withdrawals of the contentions' nodes, for a caller that leaves to wait for.
    withdrawals: Withdrawals,
}

struct State<N> {
    /// The node held by a local caller (or given to one not yet polled, or parked).
    batch: Option<Batch<N>>,
    contention: Option<Contention<N>>,
    /// The contention waits for no one (a `try_`'s).
    contention_tries: bool,
    waiters: VecDeque<Arc<Slot<N>>>,
}

/// The holds of one node, and its checks.
struct Batch<N> {
    /// The node's path.
    node: String,
    /// Holds begun on the node, its claim's included.
    begun: u32,
    /// Holds begun when the latest check that found no other node was sent.
    clear: u32,
    /// A check found another node (or got no answer): none is sent any more.
    others: bool,
    /// A check found our node gone: no hold of it may begin.
    gone: bool,
    /// Holds begun when the latest check was sent.
    sent_at: u32,
    /// Checks on their way, with the holds begun when each was sent, oldest first.
    in_flight: VecDeque<(u32, Check)>,
    checks: Checker,
    /// The node between two holders, until a check allows the next hold.
    parked: Option<N>,
    /// The end of the node's session.
    ended: Ended,
}

impl<N> Batch<N> {
    fn new(node: String, checks: Checker, ended: Ended) -> Batch<N> {
        Batch {
            node,
            begun: 1,
            clear: 0,
            others: false,
            gone: false,
            sent_at: 0,
            in_flight: VecDeque::new(),
            checks,
            parked: None,
            ended,
        }
    }

    /// Whether the next hold may begin (see the module docs).
    fn allows_next(&self, batch: u32) -> bool {
        u64::from(self.begun) < u64::from(self.clear) + u64::from(batch)
    }

    /// Sends a check now.
    fn send(&mut self) {
        let check = (self.checks)();
        self.sent_at = self.begun;
        self.in_flight.push_back((self.begun, check));
        // Polled once at once, for a store that sends on the first poll (the simulation's).
        self.read(&mut Context::from_waker(&noop_waker()));
    }

    /// Sends a check if `step` holds began since the latest, and no other node is known.
    fn send_if_due(&mut self, step: u32) {
        if !self.others && self.begun - self.sent_at >= step {
            self.send();
        }
    }

    /// Reads the answers that came; `cx` is woken by the next one.
    fn read(&mut self, cx: &mut Context<'_>) {
        let (mut clear, mut others, mut gone) = (self.clear, self.others, self.gone);
        self.in_flight
            .retain_mut(|(sent_at, check)| match check.as_mut().poll(cx) {
                Poll::Ready(Checked::Alone) => {
                    clear = clear.max(*sent_at);
                    false
                }
                Poll::Ready(Checked::Others) => {
                    others = true;
                    false
                }
                Poll::Ready(Checked::Gone) => {
                    (others, gone) = (true, true);
                    false
                }
                Poll::Pending => true,
            });
        (self.clear, self.others, self.gone) = (clear, others, gone);
    }

    /// A hold begins: counted, and a check sent if one is due.
    fn begin(&mut self, node: &mut N, step: u32)
    where
        N: LocalNode,
    {
        self.begun += 1;
        node.begins();
        self.send_if_due(step);
    }
}

/// A local caller's place in the queue.
struct Slot<N> {
    /// What it was given; set and taken under the state's lock.
    granted: Mutex<Option<Result<Option<N>>>>,
    waker: Mutex<Option<Waker>>,
    /// A `try_` acquisition: waits for no one.
    try_only: bool,
}

impl<N> Slot<N> {
    fn grant(&self, outcome: Result<Option<N>>) {
        *self.granted.lock() = Some(outcome);
        if let Some(waker) = self.waker.lock().take() {
            waker.wake();
        }
    }

    fn wake(&self) {
        if let Some(waker) = self.waker.lock().as_ref() {
            waker.wake_by_ref();
        }
    }
}

impl<N: LocalNode> Cohort<N> {
    pub(crate) fn new(batch: u32, recipe: Recipe) -> Cohort<N> {
        let batch = batch.max(1);
        Cohort {
            batch,
            step: (batch / 2).max(1),
            recipe,
            state: Mutex::new(State {
                batch: None,
                contention: None,
                contention_tries: false,
                waiters: VecDeque::new(),
            }),
            withdrawals: Withdrawals::default(),
        }
    }

    /// The withdrawals of the contentions' nodes (give it to each contention's attempt).
    pub(crate) fn withdrawals(&self) -> Withdrawals {
        self.withdrawals.clone()
    }

    /// Waits in the local queue for the node. `try_only`: returns `Ok(None)` at once if a
    /// local caller holds or waits, and otherwise gives up as its contention does. `start`
    /// makes a contention (`true`: one that waits for no one).
    pub(crate) fn wait<F>(self: &Arc<Self>, try_only: bool, start: F) -> Waiting<N, F>
    where
        F: FnMut(bool) -> Contention<N> + Unpin,
    {
        Waiting {
            cohort: self.clone(),
            slot: None,
            start,
            try_only,
        }
    }

    /// A local holder lets go of `node`: hands it to the next local caller if the rules allow
    /// (see the module docs), parks it until a check's answer allows, or else says to
    /// release it through the server.
    pub(crate) fn release(&self, node: &mut N) -> Release {
        let mut state = self.state.lock();
        let state = &mut *state;
        if state.batch.as_ref().is_some_and(|b| b.node != node.path()) {
            // Its batch was ended early (its node gone, its session over), and the local
            // callers moved on: the node only goes through the server.
            return Release::Server;
        }
        if let Some(batch) = state.batch.as_mut() {
            batch.read(&mut Context::from_waker(&noop_waker()));
            let wanted = !state.waiters.is_empty() && node.local() < u16::MAX;
            if wanted && !batch.gone && node.may_hand_on() {
                if batch.allows_next(self.batch) {
                    let mut next = node.hand_on();
                    batch.begin(&mut next, self.step);
                    metrics::handoff(self.recipe, true);
                    grant_front(&mut state.waiters, Ok(Some(next)));
                    return Release::Handed;
                }
                if !batch.others {
                    // Not yet: wait for a check's answer (sending one if none is on its
                    // way). The front waiter reads it.
                    if batch.in_flight.is_empty() {
                        batch.send();
                    }
                    if !batch.others {
                        batch.parked = Some(node.hand_on());
                        if let Some(front) = state.waiters.front() {
                            front.wake();
                        }
                        return Release::Handed;
                    }
                }
            }
        }
        self.through_server(state);
        Release::Server
    }

    /// The node goes through the server: the callers left queue again, and the first one
    /// polled starts a contention.
    fn through_server(&self, state: &mut State<N>) {
        state.batch = None;
        metrics::handoff(self.recipe, false);
        if let Some(front) = state.waiters.front() {
            front.wake();
        }
    }

    /// With a node parked: reads the checks' answers (`cx` is woken by the next one), and
    /// gives the node to the first caller if they allow the next hold. Returns the node, left
    /// (see [`LocalNode::leave`]), if it is to be released through the server.
    fn unpark(&self, state: &mut State<N>, cx: &mut Context<'_>) -> Option<N> {
        let batch = state.batch.as_mut()?;
        batch.parked.as_ref()?;
        batch.read(cx);
        let allowed = batch.allows_next(self.batch);
        if !allowed && !batch.others && !batch.in_flight.is_empty() {
            return None;
        }
        let mut node = batch.parked.take()?;
        if allowed && !batch.gone && !state.waiters.is_empty() && node.may_hand_on() {
            batch.begin(&mut node, self.step);
            metrics::handoff(self.recipe, true);
            grant_front(&mut state.waiters, Ok(Some(node)));
            return None;
        }
        node.leave();
        self.through_server(state);
        Some(node)
    }

    /// Reads the batch's checks and its session's end (`cx` is woken by the next news), and
    /// ends the batch at once if its node is gone or its session over (see the module docs):
    /// the waiters then get the session's error, or queue a fresh node. Returns the error,
    /// and the node parked (left), if any, to release through the server.
    fn watch_batch(
        &self,
        state: &mut State<N>,
        cx: &mut Context<'_>,
    ) -> (Option<Error>, Option<N>) {
        let Some(batch) = state.batch.as_mut() else {
            return (None, None);
        };
        batch.read(cx);
        let ended = match batch.ended.as_mut().poll(cx) {
            Poll::Ready(err) => Some(err),
            Poll::Pending => None,
        };
        if ended.is_none() && !batch.gone {
            return (None, None);
        }
        log::debug!(
            "local queue of {}: batch ends ({})",
            batch.node,
            ended
                .as_ref()
                .map_or("node gone".to_owned(), ToString::to_string)
        );
        let parked = batch.parked.take().map(|mut node| {
            node.leave();
            node
        });
        if let Some(err) = &ended {
            for waiter in state.waiters.drain(..) {
                waiter.grant(Err(err.clone()));
            }
        }
        self.through_server(state);
        (ended, parked)
    }

    /// [`watch_batch`](Self::watch_batch) for the waiter `slot`: a node parked is released,
    /// and one given to this waiter of a batch whose session ended is not taken (the waiter
    /// gets the error).
    fn watch_for(&self, state: &mut State<N>, slot: &Slot<N>, cx: &mut Context<'_>) {
        let (ended, parked) = self.watch_batch(state, cx);
        if let Some(node) = parked {
            node.withdraw(&self.withdrawals);
        }
        let Some(err) = ended else {
            return;
        };
        refuse_ended(&mut slot.granted.lock(), Some(err), &self.withdrawals);
    }
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// A waker that wakes no one, for reading answers outside a poll.
fn noop_waker() -> Waker {
    static NOOP: std::sync::OnceLock<Waker> = std::sync::OnceLock::new();
    NOOP.get_or_init(|| Waker::from(Arc::new(Noop))).clone()
}

/// A node handed on to the caller of `granted` whose session has ended (`ended`, or as the
/// node says) is not taken: released, and the caller gets the session's error, as it would
/// waiting on the server. (It may have been handed on before the end was known, and the
/// batch ended by another caller since.)
fn refuse_ended<N: LocalNode>(
    granted: &mut Option<Result<Option<N>>>,
    ended: Option<Error>,
    withdrawals: &Withdrawals,
) {
    let Some(Ok(Some(node))) = granted.as_ref() else {
        return;
    };
    let Some(err) = ended.or_else(|| (node.local() > 0).then(|| node.session_ended()).flatten())
    else {
        return;
    };
    if let Some(Ok(Some(mut node))) = granted.take() {
        node.leave();
        node.withdraw(withdrawals);
    }
    *granted = Some(Err(err));
}

/// Gives `outcome` to the first caller in the queue.
fn grant_front<N>(waiters: &mut VecDeque<Arc<Slot<N>>>, outcome: Result<Option<N>>) {
    if let Some(front) = waiters.pop_front() {
        front.grant(outcome);
    }
}

/// A local caller waiting in a [`Cohort`]: a future of the node (`Ok(None)`: a `try_` found
/// the lock busy). Dropping it leaves the queue; see the module docs.
pub(crate) struct Waiting<N: LocalNode, F> {
    cohort: Arc<Cohort<N>>,
    slot: Option<Arc<Slot<N>>>,
    start: F,
    try_only: bool,
}

impl<N, F> Future for Waiting<N, F>
where
    N: LocalNode,
    F: FnMut(bool) -> Contention<N> + Unpin,
{
    type Output = Result<Option<N>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let cohort = this.cohort.clone();
        let mut guard = cohort.state.lock();
        let state = &mut *guard;
        let slot = match &this.slot {
            Some(slot) => slot.clone(),
            None => {
                let idle =
                    state.batch.is_none() && state.contention.is_none() && state.waiters.is_empty();
                if this.try_only && !idle {
                    // Held or wanted by a caller of this process: busy, without the server.
                    return Poll::Ready(Ok(None));
                }
                let slot = Arc::new(Slot {
                    granted: Mutex::new(None),
                    waker: Mutex::new(None),
                    try_only: this.try_only,
                });
                state.waiters.push_back(slot.clone());
                this.slot = Some(slot.clone());
                slot
            }
        };
        *slot.waker.lock() = Some(cx.waker().clone());
        // Every waiter watches the batch (its node, its session): the last one polled is
        // woken by the news.
        cohort.watch_for(state, &slot, cx);
        refuse_ended(&mut slot.granted.lock(), None, &cohort.withdrawals);
        if let Some(outcome) = slot.granted.lock().take() {
            this.slot = None;
            // This caller may have been the one woken by the batch's news: the next one
            // watches from now on.
            if let Some(front) = state.waiters.front() {
                front.wake();
            }
            return Poll::Ready(outcome.map(|node| node.map(|n| joined(n, &cohort))));
        }
        // A parked node waits for a check's answer, which this caller reads. One to go
        // through the server is released before a new contention queues (its drop no longer
        // touches this cohort).
        if let Some(node) = cohort.unpark(state, cx) {
            node.withdraw(&cohort.withdrawals);
        }
        if state.batch.is_none() && state.contention.is_none() {
            let try_only = state.waiters.front().is_some_and(|front| front.try_only);
            state.contention = Some((this.start)(try_only));
            state.contention_tries = try_only;
        }
        if let Some(contention) = state.contention.as_mut() {
            // Driven on behalf of every local caller: a caller leaves by being dropped, and
            // its token reaches no further than its own future.
            if let Poll::Ready(outcome) = contention.as_mut().poll(cx) {
                state.contention = None;
                match outcome {
                    Ok(Some(Claim {
                        mut node,
                        checks,
                        ended,
                    })) => {
                        node.claimed();
                        let mut batch = Batch::new(node.path().to_owned(), checks, ended);
                        node.begins();
                        // At once: under contention it finds the next process's node before
                        // the batch ends, which then ends without waiting for an answer.
                        batch.send();
                        state.batch = Some(batch);
                        grant_front(&mut state.waiters, Ok(Some(node)));
                    }
                    Err(err) if !state.contention_tries => {
                        for waiter in state.waiters.drain(..) {
                            waiter.grant(Err(err.clone()));
                        }
                    }
                    // A `try_`'s contention gave up, or failed within its one call: that is
                    // the outcome of every `try_` here; the others start again. (A contention
                    // that waits gives up only with an error.)
                    gave_up => {
                        let given = gave_up.err();
                        state.waiters.retain(|waiter| {
                            if waiter.try_only {
                                waiter.grant(given.clone().map_or(Ok(None), Err));
                            }
                            !waiter.try_only
                        });
                        if let Some(front) = state.waiters.front() {
                            front.wake();
                        }
                    }
                }
            }
        }
        // A batch begun in this poll is watched from now on.
        cohort.watch_for(state, &slot, cx);
        refuse_ended(&mut slot.granted.lock(), None, &cohort.withdrawals);
        if let Some(outcome) = slot.granted.lock().take() {
            this.slot = None;
            // This caller may have been the one woken by the batch's news: the next one
            // watches from now on.
            if let Some(front) = state.waiters.front() {
                front.wake();
            }
            return Poll::Ready(outcome.map(|node| node.map(|n| joined(n, &cohort))));
        }
        Poll::Pending
    }
}

/// The node as a local holder keeps it: released through its cohort.
fn joined<N: LocalNode>(mut node: N, cohort: &Arc<Cohort<N>>) -> N {
    node.join(cohort.clone());
    node
}

impl<N: LocalNode, F> Drop for Waiting<N, F> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let (granted, contention, parked) = {
            let mut guard = self.cohort.state.lock();
            let state = &mut *guard;
            if let Some(at) = state.waiters.iter().position(|s| Arc::ptr_eq(s, &slot)) {
                state.waiters.remove(at);
            }
            let granted = slot.granted.lock().take();
            // The last caller to leave withdraws the node being queued, or releases the node
            // parked for it.
            let (mut contention, mut parked) = (None, None);
            if state.waiters.is_empty() {
                contention = state.contention.take();
                parked = state.batch.as_mut().and_then(|b| b.parked.take());
                if parked.is_some() {
                    self.cohort.through_server(state);
                }
            }
            // This caller may have been driving the contention or reading the checks: the
            // next one takes over.
            if let Some(front) = state.waiters.front() {
                front.wake();
            }
            (granted, contention, parked)
        };
        drop(contention);
        // Its delete is a withdrawal like the contention's: the caller leaving waits for it.
        if let Some(mut node) = parked {
            node.leave();
            node.withdraw(&self.cohort.withdrawals);
        }
        // A node handed to us as we left goes on to the next caller, or to the server
        // (outside the lock).
        if let Some(Ok(Some(node))) = granted {
            joined(node, &self.cohort).withdraw(&self.cohort.withdrawals);
        }
    }
}

/// Waits in `cohort`'s queue for the node, up to `deadline`: then the caller leaves the queue
/// (withdrawing the node queued for it if it was the last caller) and gets [`Elapsed`], whose
/// [`outcome`](Elapsed::outcome) is the caller's. A caller that can wait for
/// the withdrawal then waits on [`Cohort::withdrawals`].
pub(crate) async fn wait_locally<S, N, F>(
    session: &S,
    cohort: &Arc<Cohort<N>>,
    try_only: bool,
    deadline: Option<Instant>,
    start: F,
) -> std::result::Result<Result<Option<N>>, Elapsed>
where
    S: NodeStore,
    N: LocalNode,
    F: FnMut(bool) -> Contention<N> + Unpin,
{
    let mut waiting = cohort.wait(try_only, start);
    let Some(deadline) = deadline.filter(|_| !try_only) else {
        return Ok(waiting.await);
    };
    let outcome = {
        let mut timer = std::pin::pin!(session.sleep_until(deadline));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(outcome) = Pin::new(&mut waiting).poll(cx) {
                return Poll::Ready(Ok(outcome));
            }
            timer.as_mut().poll(cx).map(|()| Err(Elapsed))
        })
        .await
    };
    // Ran out: leave the queue.
    drop(waiting);
    outcome
}
