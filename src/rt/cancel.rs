//! Cancellation: a [`CancelToken`] stops calls blocked on other threads (acquisitions, and
//! the waits for a release, a close, a guard's loss or the session's state).
//!
//! A blocking call waits on its thread's parker (`runtime::block_on_or_stop`), given the
//! tokens that may stop it (the caller's, its client's close token): while it waits, its
//! thread is registered with them ([`unpark_on_cancel`]), so that cancelling wakes it, and it checks
//! them after every wake-up. What stops a call is always passed to it, never kept by the
//! thread.
//!
//! An async call cannot use the thread: it races its future against [`CancelToken::cancelled`] (its error form)
//! and drops the future when a token wins, which withdraws whatever the future had queued.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};

use parking_lot::Mutex;

use crate::error::Error;
use crate::rt::park::Parker;

/// Stops blocking acquisitions from another thread: cancel it, and every acquisition
/// given it (the `*_with` calls given [`Wait::cancel_on`](crate::Wait::cancel_on):
/// `lock_with`, `read_with`, `acquire_with`, ...) returns
/// [`Error::Cancelled`] promptly, after deleting its queued node.
/// A guard's watchdog waits (`wait_lost_with`, `wait_revocation_with`) return `None` or
/// `false`, and `Client::wait_state_change_with` the state unchanged. A release
/// (`unlock_with`) or a close (`Client::close_with`) stops waiting for the server's
/// confirmation and returns [`Error::Cancelled`]; the release or the close itself goes on in
/// the background.
///
/// Clones share one state: cancel any clone and all are cancelled, for good. A token
/// already cancelled makes acquisitions return `Cancelled` at once, before sending anything.
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// let client = zklock::Client::connect("127.0.0.1:2181")?;
/// let mutex = zklock::DistributedMutex::new(&client, "/jobs/nightly")?;
/// let shutdown = zklock::CancelToken::new();
/// let waiter = {
///     let shutdown = shutdown.clone();
///     let wait = zklock::Wait::forever().cancel_on(&shutdown);
///     std::thread::spawn(move || mutex.lock_with(wait))
/// };
/// // ... on SIGTERM:
/// shutdown.cancel();
/// assert!(matches!(waiter.join().unwrap(), Err(zklock::Error::Cancelled)));
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    /// A client's own token, cancelled by `Client::close`: its calls end with
    /// [`Error::Closed`] rather than [`Error::Cancelled`].
    closes_client: bool,
    /// Threads inside a call that a cancel of this token must unpark, with the parker they
    /// wait on (see [`unpark_on_cancel`]).
    parked: Mutex<Vec<(Thread, Arc<Parker>)>>,
    /// Condition variables waited on by calls that a cancel of this token must notify (see [`wake_on_cancel`]):
    /// a parked thread is woken by `unpark`, a condition variable only by its own notify.
    wakes: Mutex<Wakes>,
}

/// The registrations of [`wake_on_cancel`], each in a slot of its own: a client's close token
/// has one per async acquisition in progress (10,000 tasks queued on a lock: 10,000), and
/// each is removed when its acquisition ends, so finding it must not scan the others (a scan
/// took a quarter of a 30,000-task drain's time).
#[derive(Default)]
struct Wakes {
    slots: Vec<Option<Arc<dyn CancelWake>>>,
    /// Slots emptied, to be used again.
    free: Vec<usize>,
}

/// A condition variable that a cancel must notify (see [`wake_on_cancel`]).
pub(crate) trait CancelWake: Send + Sync {
    /// Notifies the waiters, under the lock they check the token under, so that a cancel
    /// between their check and their wait is not missed.
    fn wake(&self);
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// The token a client cancels when it is closed.
    pub(crate) fn for_client() -> CancelToken {
        CancelToken {
            inner: Arc::new(Inner {
                closes_client: true,
                ..Inner::default()
            }),
        }
    }

    /// Cancels: every acquisition given this token (now or later) returns
    /// [`Error::Cancelled`]. Never blocks; idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        for (thread, parker) in self.inner.parked.lock().iter() {
            parker.unpark();
            thread.unpark();
        }
        for wake in self.inner.wakes.lock().slots.iter().flatten() {
            wake.wake();
        }
    }

    /// Whether [`cancel`](Self::cancel) was called on this token or a clone of it.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A future ready once this token (or a clone) is cancelled, at once if it already is:
    /// for async code that stops on the same token as its blocking calls, on any executor
    /// (tokio, smol, `futures::executor`; zklock depends on none of them).
    ///
    /// The future is `Send` and `'static` (it holds a clone of the token), so it can be
    /// spawned, stored or raced in a `select!`. It registers a waker with the token on its
    /// first poll only and removes it when dropped, so futures made and dropped in a loop
    /// leave nothing behind; a [`cancel`](Self::cancel) from any thread wakes it.
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// let shutdown = zklock::CancelToken::new();
    /// let stopped = shutdown.cancelled();
    /// std::thread::spawn({
    ///     let shutdown = shutdown.clone();
    ///     move || shutdown.cancel() // e.g. from a signal handler's thread
    /// });
    /// stopped.await; // returns once cancelled
    /// assert!(shutdown.is_cancelled());
    /// # });
    /// ```
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        let token = self.clone();
        async move {
            token.cancelled_error().await;
        }
    }

    /// Ready once the token is cancelled: the error an acquisition stopped by it returns
    /// ([`Error::Closed`] for a client's own token, else [`Error::Cancelled`]).
    pub(crate) async fn cancelled_error(&self) -> Error {
        let slot = Arc::new(WakerSlot::default());
        let _registered = wake_on_cancel(self, slot.clone());
        std::future::poll_fn(|cx| {
            // Set before looking, so that a cancel in between wakes the new waker.
            *slot.0.lock() = Some(cx.waker().clone());
            if self.is_cancelled() {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        if self.inner.closes_client {
            Error::Closed
        } else {
            Error::Cancelled
        }
    }
}

/// The waker of a task waiting in [`CancelToken::cancelled`].
#[derive(Default)]
struct WakerSlot(Mutex<Option<std::task::Waker>>);

impl CancelWake for WakerSlot {
    fn wake(&self) {
        if let Some(waker) = self.0.lock().take() {
            waker.wake();
        }
    }
}

/// Ready with the error of the first of `tokens` to be cancelled; never if none is.
pub(crate) async fn first_cancelled(tokens: &[CancelToken]) -> Error {
    if tokens.is_empty() {
        return std::future::pending().await;
    }
    let mut waits: Vec<_> = tokens
        .iter()
        .map(|t| Box::pin(t.cancelled_error()))
        .collect();
    std::future::poll_fn(|cx| {
        for wait in &mut waits {
            if let std::task::Poll::Ready(err) = wait.as_mut().poll(cx) {
                return std::task::Poll::Ready(err);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Awaits `work` until it ends, or until `token` (if any) is cancelled: then the error of a
/// call stopped by it. `work` is polled first, so work already over is reported as it went,
/// even with a token cancelled before. Dropping `work` is all a cancel does to it.
pub(crate) async fn unless_cancelled<F: Future>(
    token: Option<&CancelToken>,
    work: F,
) -> Result<F::Output, Error> {
    let Some(token) = token else {
        return Ok(work.await);
    };
    let mut work = std::pin::pin!(work);
    let mut cancelled = std::pin::pin!(token.cancelled_error());
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(done) = work.as_mut().poll(cx) {
            return std::task::Poll::Ready(Ok(done));
        }
        cancelled.as_mut().poll(cx).map(Err)
    })
    .await
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// Makes a cancel of one of `tokens` unpark the calling thread until the returned value is
/// dropped: for a wait that parks the thread (`runtime::block_on`, a connect's pauses) and
/// checks the tokens it was given after every wake-up.
pub(crate) fn unpark_on_cancel<'a>(
    tokens: impl IntoIterator<Item = &'a CancelToken>,
) -> UnparkOnCancel {
    let me = thread::current();
    let tokens: Vec<CancelToken> = tokens.into_iter().cloned().collect();
    for token in &tokens {
        token
            .inner
            .parked
            .lock()
            .push((me.clone(), Parker::current()));
    }
    UnparkOnCancel {
        tokens,
        _this_thread: std::marker::PhantomData,
    }
}

/// The calling thread is unparked by a cancel of some tokens (see [`unpark_on_cancel`]) until dropped.
/// Not `Send`: it must be dropped on the thread that made it.
#[must_use]
pub(crate) struct UnparkOnCancel {
    tokens: Vec<CancelToken>,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl Drop for UnparkOnCancel {
    fn drop(&mut self) {
        let me = thread::current().id();
        for token in &self.tokens {
            let mut parked = token.inner.parked.lock();
            if let Some(at) = parked.iter().position(|(t, _)| t.id() == me) {
                parked.swap_remove(at);
            }
        }
    }
}

/// Why a call stopped by `tokens` ends, if one of them is cancelled: [`Error::Closed`] if
/// a client's own token is (closing outranks a cancel), else [`Error::Cancelled`]. The one
/// place a cancellation turns into the caller's outcome.
pub(crate) fn stopped(tokens: &[CancelToken]) -> Option<Error> {
    let mut cancelled = tokens.iter().filter(|t| t.is_cancelled()).peekable();
    cancelled.peek()?;
    Some(if cancelled.any(|t| t.inner.closes_client) {
        Error::Closed
    } else {
        Error::Cancelled
    })
}

/// Makes a cancel of `token` notify `wake` until the returned value is dropped: for waits on a
/// condition variable, which `unpark` does not reach.
pub(crate) fn wake_on_cancel(token: &CancelToken, wake: Arc<dyn CancelWake>) -> WakeOnCancel {
    let mut wakes = token.inner.wakes.lock();
    let slot = match wakes.free.pop() {
        Some(slot) => {
            wakes.slots[slot] = Some(wake);
            slot
        }
        None => {
            wakes.slots.push(Some(wake));
            wakes.slots.len() - 1
        }
    };
    WakeOnCancel {
        token: token.clone(),
        slot,
    }
}

/// A registration of [`wake_on_cancel`], removed when dropped.
#[must_use]
pub(crate) struct WakeOnCancel {
    token: CancelToken,
    /// Its slot in the token's [`Wakes`].
    slot: usize,
}

impl Drop for WakeOnCancel {
    fn drop(&mut self) {
        let mut wakes = self.token.inner.wakes.lock();
        wakes.slots[self.slot] = None;
        wakes.free.push(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn cancel_unparks_a_registered_thread() {
        let token = CancelToken::new();
        let waiter = {
            let token = token.clone();
            thread::spawn(move || {
                let _on_cancel = unpark_on_cancel([&token]);
                let start = Instant::now();
                while !token.is_cancelled() && start.elapsed() < Duration::from_secs(10) {
                    thread::park();
                }
                start.elapsed()
            })
        };
        thread::sleep(Duration::from_millis(50));
        token.cancel();
        assert!(waiter.join().unwrap() < Duration::from_secs(5));
        assert!(token.inner.parked.lock().is_empty());
    }

    /// Counts its wakes.
    #[derive(Default)]
    struct Counted(std::sync::atomic::AtomicUsize);

    impl CancelWake for Counted {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_cancel_wakes_the_registrations_still_in_place() {
        let token = CancelToken::new();
        let wakes: Vec<Arc<Counted>> = (0..5).map(|_| Arc::default()).collect();
        let mut registered: Vec<Option<WakeOnCancel>> = wakes
            .iter()
            .map(|w| Some(wake_on_cancel(&token, w.clone())))
            .collect();
        // Two leave; a new one takes a slot they freed.
        registered[1] = None;
        registered[3] = None;
        let late = Arc::new(Counted::default());
        let _late = wake_on_cancel(&token, late.clone());
        assert_eq!(
            token.inner.wakes.lock().slots.len(),
            5,
            "a freed slot reused"
        );
        token.cancel();
        let woken: Vec<usize> = wakes.iter().map(|w| w.0.load(Ordering::SeqCst)).collect();
        assert_eq!(woken, [1, 0, 1, 0, 1]);
        assert_eq!(late.0.load(Ordering::SeqCst), 1);
        drop(registered);
    }

    /// The registrations a token holds now.
    fn registered(token: &CancelToken) -> usize {
        token.inner.wakes.lock().slots.iter().flatten().count()
    }

    #[test]
    fn cancelled_registers_only_while_polled_and_removes_itself_when_dropped() {
        use std::future::Future;
        use std::task::Context;
        let token = CancelToken::new();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // Made and dropped unpolled: nothing registered.
        for _ in 0..100 {
            drop(token.cancelled());
        }
        assert_eq!(registered(&token), 0);
        // Polled, then dropped pending: registered once, then removed.
        let mut pending: Vec<_> = (0..100).map(|_| Box::pin(token.cancelled())).collect();
        for wait in &mut pending {
            assert!(wait.as_mut().poll(&mut cx).is_pending());
            assert!(wait.as_mut().poll(&mut cx).is_pending(), "polled again");
        }
        assert_eq!(registered(&token), 100, "one registration per future");
        drop(pending);
        assert_eq!(registered(&token), 0, "every registration removed");
        // Ready once cancelled, and its registration gone when it is dropped.
        let mut wait = Box::pin(token.cancelled());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        token.cancel();
        assert!(wait.as_mut().poll(&mut cx).is_ready());
        drop(wait);
        assert_eq!(registered(&token), 0);
        // Already cancelled: ready at the first poll.
        assert!(Box::pin(token.cancelled())
            .as_mut()
            .poll(&mut cx)
            .is_ready());
        assert_eq!(registered(&token), 0);
    }

    #[test]
    fn a_close_outranks_a_cancel_and_nothing_cancelled_stops_nothing() {
        let (token, closes) = (CancelToken::new(), CancelToken::for_client());
        let both = [token.clone(), closes.clone()];
        assert!(stopped(&both).is_none());
        token.cancel();
        assert!(matches!(stopped(&both), Some(Error::Cancelled)));
        closes.cancel();
        assert!(matches!(stopped(&both), Some(Error::Closed)));
        assert!(stopped(&[]).is_none());
    }
}
