//! One request's outcome, filled in by the session's I/O thread and awaited by whoever sent it:
//! a future for async callers and runtime tasks, and, through `runtime::block_on`, a parked
//! thread for blocking ones. The I/O thread only stores the value and wakes; it never runs the
//! waiter's code.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::error::Error;

struct Inner<T> {
    value: Option<Result<T, Error>>,
    waker: Option<Waker>,
}

/// The producer's side.
pub(crate) struct Slot<T>(Arc<Mutex<Inner<T>>>);

/// The consumer's side: a future of the request's outcome.
pub struct Completion<T>(Arc<Mutex<Inner<T>>>);

impl<T> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Completion")
    }
}

/// A new, empty completion and the slot that fills it.
pub(crate) fn pair<T>() -> (Slot<T>, Completion<T>) {
    let inner = Arc::new(Mutex::new(Inner {
        value: None,
        waker: None,
    }));
    (Slot(inner.clone()), Completion(inner))
}

/// A completion that is already done.
#[cfg(test)]
pub(crate) fn ready<T>(value: Result<T, Error>) -> Completion<T> {
    let (slot, completion) = pair();
    slot.fill(value);
    completion
}

impl<T> Slot<T> {
    pub(crate) fn fill(self, value: Result<T, Error>) {
        let waker = {
            let mut inner = self.0.lock();
            inner.value = Some(value);
            inner.waker.take()
        };
        if let Some(waker) = waker {
            wake(waker);
        }
    }
}

thread_local! {
    /// The wakers of completions filled while a [`WakeLater`] of this thread lives.
    static LATER: RefCell<Option<Vec<Waker>>> = const { RefCell::new(None) };
}

fn wake(waker: Waker) {
    let waker = LATER.with(|later| match later.borrow_mut().as_mut() {
        Some(later) => {
            // A caller's pipelined requests are answered one after another: its wakers are
            // next to each other (a repeat further back only costs a wake-up, and scanning all
            // would cost thousands of comparisons a reply in a burst).
            if !later.iter().rev().take(4).any(|w| w.will_wake(&waker)) {
                later.push(waker);
            }
            None
        }
        None => Some(waker),
    });
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// While it lives, the completions this thread fills wake their waiters when it drops, each
/// waiter once. The I/O thread holds one while it reads replies already at hand: a caller
/// whose two pipelined requests are answered in one read (a create and its listing) is then
/// woken once, for both, instead of waking for the first and sleeping again.
pub(crate) struct WakeLater(std::marker::PhantomData<*const ()>);

impl WakeLater {
    pub(crate) fn new() -> WakeLater {
        LATER.with(|later| {
            later.borrow_mut().get_or_insert_with(Vec::new);
        });
        WakeLater(std::marker::PhantomData)
    }
}

impl Drop for WakeLater {
    fn drop(&mut self) {
        let wakers = LATER.with(|later| later.borrow_mut().take());
        for waker in wakers.into_iter().flatten() {
            waker.wake();
        }
    }
}

impl<T> Future for Completion<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut inner = self.0.lock();
        if let Some(value) = inner.value.take() {
            return Poll::Ready(value);
        }
        match &inner.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => inner.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Unpin for Completion<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn filled_from_another_thread_wakes_a_blocked_waiter() {
        let (slot, completion) = pair::<u32>();
        let filler = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            slot.fill(Ok(7));
        });
        let got =
            crate::rt::runtime::block_on(completion, Some(Instant::now() + Duration::from_secs(5)));
        assert_eq!(got.ok().map(|r| r.unwrap()), Some(7));
        filler.join().unwrap();
        assert!(matches!(
            crate::rt::runtime::block_on(ready::<u8>(Err(Error::NoNode)), None),
            Ok(Err(Error::NoNode))
        ));
    }
}
