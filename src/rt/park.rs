//! A thread's wake-up flag (see [`Parker`]): below both the blocking waits of `runtime.rs`
//! and the cancellation of `cancel.rs`, which wakes a thread waiting in one.

use std::sync::Arc;
use std::task::Wake;
use std::time::Instant;

/// A thread's wake-up flag, on a `parking_lot` condition variable: the waker of every future a
/// blocked caller polls ([`block_on`](super::runtime::block_on)), and what a cancel of a token the blocked call was
/// given notifies. Unlike `thread::park`, nothing else in the process (a library that unparks
/// threads it does not own) can wake it spuriously.
pub(crate) struct Parker {
    notified: parking_lot::Mutex<bool>,
    wake: parking_lot::Condvar,
}

thread_local! {
    static PARKER: Arc<Parker> = Arc::new(Parker {
        notified: parking_lot::Mutex::new(false),
        wake: parking_lot::Condvar::new(),
    });
}

impl Parker {
    /// The calling thread's parker.
    pub(crate) fn current() -> Arc<Parker> {
        PARKER.with(Arc::clone)
    }

    pub(crate) fn unpark(&self) {
        *self.notified.lock() = true;
        self.wake.notify_one();
    }

    /// Waits until notified (since the last wait returned) or `until`.
    pub(crate) fn park_until(&self, until: Option<Instant>) {
        let mut notified = self.notified.lock();
        while !*notified {
            match until {
                Some(until) => {
                    if self.wake.wait_until(&mut notified, until).timed_out() {
                        break;
                    }
                }
                None => self.wake.wait(&mut notified),
            }
        }
        *notified = false;
    }
}

impl Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.unpark();
    }
}
