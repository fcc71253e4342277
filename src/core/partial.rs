//! All or nothing: the nodes an acquisition of several (a multi-lock, a semaphore's gate and
//! leases) has taken so far, released if it does not complete.

use std::time::Instant;

use log::debug;

use crate::rt::cancel::{interruption, shielded};

use super::held::Held;
use super::withdraw::withdraw_grace;

/// The nodes an all-or-nothing acquisition (multi-lock, semaphore) has taken so far. Dropped
/// before it completes, it releases them in reverse order, waiting for the server no longer
/// than the acquisition's deadline: the rest of the cleanup goes on in the background, so a
/// timed call returns on time even when the connection fails under it.
pub(crate) struct Partial {
    held: Vec<Held>,
    deadline: Option<Instant>,
}

impl Partial {
    pub(crate) fn new(deadline: Option<Instant>) -> Partial {
        Partial {
            held: Vec::new(),
            deadline,
        }
    }

    pub(crate) fn push(&mut self, held: Held) {
        self.held.push(held);
    }

    /// Everything was taken: the nodes, in the order taken, now for the caller to hold.
    pub(crate) fn complete(mut self) -> Vec<Held> {
        std::mem::take(&mut self.held)
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        // Replies are waited for until the caller's deadline plus the grace a queued node's
        // withdrawal gets (so a healthy release is seen through and nothing is left behind on
        // return), never longer; a cancelled (or closed) caller gets the shorter grace. What
        // is not confirmed by then finishes in the background.
        let stopped = interruption().is_some();
        let grace = withdraw_grace();
        let cleanup_deadline = self.deadline.map(|d| d + grace);
        while let Some(mut held) = self.held.pop() {
            let wait = cleanup_deadline.map_or(held.session_timeout(), |d| {
                d.saturating_duration_since(Instant::now())
            });
            let wait = if stopped { wait.min(grace) } else { wait };
            if let Err(err) = shielded(|| held.release_within(wait)) {
                debug!(
                    "releasing {} after a failed acquisition: {err}",
                    held.node_path()
                );
            }
        }
    }
}
