//! One request's outcome, filled in by the session's I/O thread and awaited by whoever sent it:
//! a future for async callers and runtime tasks, and, through `runtime::block_on`, a parked
//! thread for blocking ones. The I/O thread only stores the value and wakes; it never runs the
//! waiter's code.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::Error;

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
