//! Local handoff (issue 36): the callers of one client on one lock path queue in this process
//! behind one lock node, and a releasing holder passes the node to the next local caller
//! without the server, as long as that is safe and fair to other processes.
//!
//! A [`Cohort`] is the local queue of one (client, lock path, kind of node). Its callers wait
//! on it in FIFO order; when nobody here holds or queues a node, the first caller's poll starts
//! one *contention* (the ordinary acquisition of the core, plus a listing that watches the lock
//! path's children) on behalf of all of them, and whichever caller is polled drives it: no
//! task of its own, so it runs on any executor, blocking and async callers mixed, and in the
//! deterministic simulation. The node it claims goes to the first caller in the queue.
//!
//! A holder's release ([`Cohort::release`]) hands the node to the next local caller only if
//! - a local caller waits;
//! - no other contender is known to wait, or fewer than `batch` local holds happened since
//!   this process learnt of one: from the listing taken at the claim, or from the child watch
//!   it set (a notification, no polling);
//! - the node may be passed on at this instant ([`LocalNode::may_hand_on`]: its lease reads
//!   `Held`, it is not known to be deleted, no revocation was requested);
//! - fewer than `u16::MAX` handoffs happened on this node (the fencing token's local number).
//!
//! Otherwise the node is released through the server as without local handoff, and the local
//! callers still waiting start a new contention: their new node queues behind every process
//! that waited meanwhile.
//!
//! A caller that leaves (timeout, cancellation, a dropped future) only leaves the local queue;
//! the last one to leave drops the contention, which withdraws the node. A node handed to a
//! caller that left before it saw it is passed on (or released) by that caller's drop.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::Result;
use crate::metrics::{self, Recipe};
use crate::rt::cancel;

use super::seam::NodeStore;
use super::withdraw::Withdrawals;

/// Ready once another contender may be waiting for the lock: the child watch set after the
/// claim fired (or the session ended). Dropped after the node's delete, once fired by it.
pub(crate) type Others = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a contention yields: the node, whether another contender was queued when it was
/// claimed, and the watch that tells of contenders queued later.
pub(crate) struct Claim<N> {
    pub(crate) node: N,
    pub(crate) others: bool,
    pub(crate) watch: Option<Others>,
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
}

/// What a holder's release comes to.
pub(crate) enum Release {
    /// Passed to the next local caller: nothing to send.
    Handed,
    /// Release the node through the server, as without local handoff; drop the watch after
    /// the delete (it fires on it, and is then gone without a request).
    Server(Option<Others>),
}

/// The local queue of one lock path, kind of node and client.
pub(crate) struct Cohort<N> {
    /// Local holds allowed once another contender is known to wait (at least 1).
    batch: u32,
    /// For the metrics.
    recipe: Recipe,
    state: Mutex<State<N>>,
    /// The withdrawals of the contentions' nodes, for a caller that leaves to wait for.
    withdrawals: Withdrawals,
}

struct State<N> {
    /// A local caller holds the node (or it was handed to one not yet polled).
    held: bool,
    contention: Option<Contention<N>>,
    /// The contention waits for no one (a `try_`'s).
    contention_tries: bool,
    waiters: VecDeque<Arc<Slot<N>>>,
    /// The child watch of the node held.
    others: Option<Others>,
    /// Local holds since another contender was known to wait; `None` while none is known.
    seen: Option<u32>,
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
        Cohort {
            batch: batch.max(1),
            recipe,
            state: Mutex::new(State {
                held: false,
                contention: None,
                contention_tries: false,
                waiters: VecDeque::new(),
                others: None,
                seen: None,
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
    /// (see the module docs), else says to release it through the server.
    pub(crate) fn release(&self, node: &mut N) -> Release {
        let mut state = self.state.lock();
        if state.seen.is_none() {
            if let Some(others) = state.others.as_mut() {
                let waker = Waker::from(Arc::new(Noop));
                if others
                    .as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_ready()
                {
                    // Counting the hold that ends now.
                    state.seen = Some(1);
                    state.others = None;
                }
            }
        }
        let within = state.seen.is_none_or(|seen| seen < self.batch);
        if !state.waiters.is_empty() && within && node.local() < u16::MAX && node.may_hand_on() {
            let next = node.hand_on();
            if let Some(seen) = state.seen.as_mut() {
                *seen += 1;
            }
            metrics::handoff(self.recipe, true);
            grant_front(&mut state, Ok(Some(next)));
            return Release::Handed;
        }
        state.held = false;
        state.seen = None;
        metrics::handoff(self.recipe, false);
        // The callers left queue again: the first one polled starts a contention.
        if let Some(front) = state.waiters.front() {
            front.wake();
        }
        Release::Server(state.others.take())
    }
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Gives `outcome` to the first caller in the queue.
fn grant_front<N>(state: &mut State<N>, outcome: Result<Option<N>>) {
    if let Some(front) = state.waiters.pop_front() {
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
        let mut state = cohort.state.lock();
        let slot = match &this.slot {
            Some(slot) => slot.clone(),
            None => {
                let idle = !state.held && state.contention.is_none() && state.waiters.is_empty();
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
        if let Some(outcome) = slot.granted.lock().take() {
            this.slot = None;
            return Poll::Ready(outcome.map(|node| node.map(|n| joined(n, &cohort))));
        }
        *slot.waker.lock() = Some(cx.waker().clone());
        if !state.held && state.contention.is_none() {
            let try_only = state.waiters.front().is_some_and(|front| front.try_only);
            state.contention = Some((this.start)(try_only));
            state.contention_tries = try_only;
        }
        if let Some(contention) = state.contention.as_mut() {
            // Driven on behalf of every local caller: a cancelled caller's token must not
            // stop it (the caller leaves by being dropped; a client's close still does).
            let polled = cancel::shielded(|| contention.as_mut().poll(cx));
            if let Poll::Ready(outcome) = polled {
                state.contention = None;
                match outcome {
                    Ok(Some(claim)) => {
                        state.held = true;
                        state.seen = claim.others.then_some(1);
                        state.others = claim.watch;
                        grant_front(&mut state, Ok(Some(claim.node)));
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
        if let Some(outcome) = slot.granted.lock().take() {
            this.slot = None;
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
        let (granted, contention) = {
            let mut state = self.cohort.state.lock();
            if let Some(at) = state.waiters.iter().position(|s| Arc::ptr_eq(s, &slot)) {
                state.waiters.remove(at);
            }
            let granted = slot.granted.lock().take();
            // The last caller to leave withdraws the node being queued.
            let contention = if state.waiters.is_empty() {
                state.contention.take()
            } else {
                None
            };
            // This caller may have been driving the contention: the next one takes over.
            if let Some(front) = state.waiters.front() {
                front.wake();
            }
            (granted, contention)
        };
        drop(contention);
        // A node handed to us as we left goes on to the next caller, or to the server (its
        // own drop, outside the lock).
        if let Some(Ok(Some(node))) = granted {
            drop(joined(node, &self.cohort));
        }
    }
}

/// Waits in `cohort`'s queue for the node, up to `deadline`: then the caller leaves the queue
/// (withdrawing the node queued for it if it was the last caller) and gets `None`; the outcome
/// is then the core's for a wait that ran out (`contend::gave_up`). A caller that can wait for
/// the withdrawal then waits on [`Cohort::withdrawals`].
pub(crate) async fn wait_locally<S, N, F>(
    session: &S,
    cohort: &Arc<Cohort<N>>,
    try_only: bool,
    deadline: Option<Instant>,
    start: F,
) -> Option<Result<Option<N>>>
where
    S: NodeStore,
    N: LocalNode,
    F: FnMut(bool) -> Contention<N> + Unpin,
{
    let mut waiting = cohort.wait(try_only, start);
    let Some(deadline) = deadline.filter(|_| !try_only) else {
        return Some(waiting.await);
    };
    let outcome = {
        let mut timer = std::pin::pin!(session.sleep_until(deadline));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(outcome) = Pin::new(&mut waiting).poll(cx) {
                return Poll::Ready(Some(outcome));
            }
            timer.as_mut().poll(cx).map(|()| None)
        })
        .await
    };
    // Ran out: leave the queue.
    drop(waiting);
    outcome
}
