//! All or nothing: the nodes an acquisition of several (a multi-lock, a semaphore's gate and
//! permit nodes) has taken so far, released if it does not complete.

use log::debug;

use super::hold::Hold;
use super::session_view::Liveness;
use super::wait::Budget;
use super::withdraw::Withdrawals;

/// The nodes an all-or-nothing acquisition (multi-lock, semaphore) has taken so far. Dropped
/// before it completes (an error, a timeout, or the future dropped), it releases them in the
/// background, in reverse order of taking; the acquisition's front end waits for that, as for
/// a withdrawn node (see [`Withdrawals`]).
pub(crate) struct Partial<H: Hold> {
    held: Vec<H>,
    withdrawals: Withdrawals,
}

impl<H: Hold> Partial<H> {
    pub(crate) fn new(attempt: &Budget) -> Partial<H> {
        Partial {
            held: Vec::new(),
            withdrawals: attempt.withdrawals.clone(),
        }
    }

    pub(crate) fn push(&mut self, held: H) {
        self.held.push(held);
    }

    /// Everything was taken: the nodes, in the order taken, now for the caller to hold.
    pub(crate) fn complete(mut self) -> Vec<H> {
        std::mem::take(&mut self.held)
    }
}

impl<H: Hold> Drop for Partial<H> {
    fn drop(&mut self) {
        while let Some(mut held) = self.held.pop() {
            debug!("releasing {} after a failed acquisition", held.node_path());
            // Waited for only on a live connection (see `OurNode`).
            let connected = held.liveness() == Liveness::Connected;
            held.release_in_background(connected.then(|| self.withdrawals.begin()));
        }
    }
}
