//! Withdrawing our node: a contender that gives up, fails, is cancelled or whose future is
//! dropped deletes the node it queued, in the background; a caller that can wait (a blocking
//! call, or an async call that returns) waits for that briefly.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use log::debug;

use super::seam::ZkSession;
use super::session_view::Liveness;

/// Our node while we wait: withdrawn on every path that does not end holding the lock (an
/// error, a timeout, a cancellation, or the future being dropped at any await point).
pub(super) struct OurNode<S: ZkSession> {
    pub(super) session: Arc<S>,
    pub(super) node_path: String,
    pub(super) armed: bool,
    /// Told when the withdrawal is settled, for a caller who waits for it.
    pub(super) withdrawals: Withdrawals,
}

impl<S: ZkSession> Drop for OurNode<S> {
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

    /// Waits until every withdrawal begun so far is settled, or `timer` resolves (a sleep on
    /// the caller's clock: the monotonic one, or the simulation's).
    pub(crate) async fn settled(&self, timer: impl Future<Output = ()>) {
        let mut timer = std::pin::pin!(timer);
        loop {
            if *self.0.pending.lock() == 0 {
                return;
            }
            let listener = self.0.settled.listen();
            if *self.0.pending.lock() == 0 {
                return;
            }
            let mut listener = std::pin::pin!(listener);
            let timed_out = std::future::poll_fn(|cx| {
                if listener.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(false);
                }
                timer.as_mut().poll(cx).map(|()| true)
            })
            .await;
            if timed_out {
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

/// How long a contender that gives up waits for the delete of its node to be confirmed.
pub(crate) const WITHDRAW_WAIT: Duration = Duration::from_secs(1);

/// The same for a cancelled (or closed) acquisition; the background retry finishes the job.
pub(crate) const CANCEL_WITHDRAW_WAIT: Duration = Duration::from_millis(200);

/// How long past its deadline a timed acquisition waits for its withdrawals, whichever of the
/// two above applies: about a delete's round trip on a connection that answers. On one that
/// does not (silent: no FIN, no RST, so it still looks connected) the call returns by then,
/// and the withdrawal goes on in the background, where the late node of an unanswered create
/// is still found by its protected name and deleted. A deadline is the caller's: the grace
/// for a tidy return must not add a release timeout to it.
pub(crate) const PAST_DEADLINE_WITHDRAW_WAIT: Duration = Duration::from_millis(100);
