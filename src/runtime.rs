//! zklock's own async runtime thread, and blocking waits on futures with a deadline.
//!
//! `zookeeper-client` is async. Its session task runs on a current-thread tokio runtime that
//! zklock drives on a thread of its own, so the blocking API works from any thread, including
//! one that belongs to someone else's runtime (where `block_on` would panic). Requests are sent
//! to the session task over the crate's channel at the moment an operation is *called*, so the
//! calling thread issues them itself (keeping their order) and then parks until the reply future
//! resolves: one hop there, one hop back.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use log::{debug, warn};
use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// The runtime thread; stopped when dropped.
pub(crate) struct Runtime {
    handle: tokio::runtime::Handle,
    /// The process that started the thread: a forked child has no such thread.
    pid: u32,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Runtime {
    pub(crate) fn start() -> Result<Runtime> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| Error::Runtime {
                reason: format!("cannot build its runtime: {e}"),
            })?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name("zklock-runtime".into())
            .spawn(move || {
                // The client crate's log lines, relayed without blocking this thread.
                let _trace = crate::trace::install();
                // Ends when the sender is sent to or dropped.
                let _ = runtime.block_on(stopped);
                // Dropping the runtime here cancels leftover tasks on this thread, which is not
                // an async context, so it cannot panic.
                drop(runtime);
            })
            .map_err(|e| Error::Runtime {
                reason: format!("cannot spawn its runtime thread: {e}"),
            })?;
        Ok(Runtime {
            handle,
            pid: std::process::id(),
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if self.pid != std::process::id() {
                // Forked: the thread exists only in the parent; joining it here would hang.
                std::mem::forget(thread);
            } else if thread.thread().id() == thread::current().id() {
                // The last reference died inside a task on the runtime itself: the thread ends on
                // its own once the task returns.
                debug!("zklock runtime dropped from its own thread");
            } else if thread.join().is_err() {
                warn!("zklock runtime thread panicked");
            }
        }
    }
}

/// The instant `timeout` from now; far in the future for timeouts too large to represent.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on the calling thread, parking between polls, until it completes or
/// `deadline` passes, or a token the thread watches is cancelled (`cancel::interrupted`). Then
/// the future is handed back unfinished, so the caller can decide whether to drop it or let a
/// background task finish it (a request already sent may still execute).
pub(crate) fn block_on<F: Future + Unpin>(
    mut future: F,
    deadline: Option<Instant>,
) -> Result<F::Output, F> {
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = pin!(&mut future).poll(&mut cx) {
            return Ok(output);
        }
        if crate::cancel::interrupted() {
            return Err(future);
        }
        match deadline {
            None => thread::park(),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(future);
                }
                thread::park_timeout(deadline - now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_returns_output_or_hands_back_the_future() {
        let rt = Runtime::start().unwrap();
        let (tx, rx) = oneshot::channel::<u32>();
        let rx = match block_on(rx, Some(Instant::now() + Duration::from_millis(20))) {
            Err(rx) => rx,
            Ok(v) => panic!("resolved early: {v:?}"),
        };
        rt.handle().spawn(async move {
            tokio::task::yield_now().await;
            let _ = tx.send(7);
        });
        assert_eq!(block_on(rx, None).ok().and_then(|r| r.ok()), Some(7));
    }
}
