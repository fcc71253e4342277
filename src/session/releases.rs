//! The count of a client's background releases, so that closing it can wait for them.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// Counts background releases so that closing a client can wait for them.
#[derive(Default)]
pub(crate) struct Releases {
    pending: Mutex<usize>,
    idle: Condvar,
    /// Notified whenever the count changes, for the client's state thread (metrics).
    pub(crate) changed: event_listener::Event,
}

/// One release counted as pending while this lives.
pub(super) struct PendingRelease(Arc<Releases>);

impl Releases {
    pub(super) fn begin(self: &Arc<Self>) -> PendingRelease {
        *self.pending.lock() += 1;
        self.changed.notify(usize::MAX);
        PendingRelease(self.clone())
    }

    /// How many releases are being retried in the background.
    pub(crate) fn pending(&self) -> usize {
        *self.pending.lock()
    }

    /// Waits until no release is pending; `false` if `deadline` passed first.
    pub(crate) fn wait_idle(&self, deadline: Instant) -> bool {
        let mut pending = self.pending.lock();
        while *pending > 0 {
            if self.idle.wait_until(&mut pending, deadline).timed_out() {
                return *pending == 0;
            }
        }
        true
    }
}

impl Drop for PendingRelease {
    fn drop(&mut self) {
        let mut pending = self.0.pending.lock();
        *pending -= 1;
        if *pending == 0 {
            self.0.idle.notify_all();
        }
        // Runs on the runtime thread: a notification only, never blocking.
        self.0.changed.notify(usize::MAX);
    }
}
