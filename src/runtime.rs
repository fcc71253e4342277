//! zklock's own async runtime thread, and blocking waits on futures with a deadline.
//!
//! `zookeeper-client` is async, and does its I/O through `async-io`. Its session task runs on
//! a single-threaded executor that zklock drives on a thread of its own, inside
//! `async_io::block_on`: that thread waits in the I/O reactor itself, so a reply or a watch
//! event wakes the thread that handles it directly, without passing through `async-io`'s
//! driver thread first (one context switch less per packet, which on a loaded host is most of
//! a loopback round trip). The blocking API works from any thread, including one that belongs
//! to someone else's runtime. Requests are sent to the session task over the crate's channel at
//! the moment an operation is *called*, so the calling thread issues them itself (keeping their
//! order) and then parks until the reply future resolves: one hop there, one hop back.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use async_executor::Executor;
use event_listener::Event;
use futures_lite::FutureExt;
use log::{debug, warn};

use crate::error::{Error, Result};
use crate::relay::io_log;

/// The runtime thread; stopped when dropped.
pub(crate) struct Runtime {
    handle: Handle,
    /// The process that started the thread: a forked child has no such thread.
    pid: u32,
    stop: Abort,
    thread: Option<thread::JoinHandle<()>>,
}

impl Runtime {
    pub(crate) fn start() -> Result<Runtime> {
        let executor = Arc::new(Executor::new());
        let handle = Handle {
            executor: Arc::downgrade(&executor),
        };
        let stop = Abort::default();
        let stopped = stop.clone();
        let thread = thread::Builder::new()
            .name("zklock-runtime".into())
            .spawn(move || {
                async_io::block_on(executor.run(stopped.aborted()));
                // The thread holds the only strong reference: dropping it drops every task
                // left, here, on the runtime thread.
                drop(executor);
            })
            .map_err(|e| Error::Runtime {
                reason: format!("cannot spawn its runtime thread: {e}"),
            })?;
        Ok(Runtime {
            handle,
            pid: std::process::id(),
            stop,
            thread: Some(thread),
        })
    }

    /// The runtime a new client runs on: one thread per process, shared by every client in
    /// it, started with the first and stopped (joined) when the last one is dropped. With
    /// several clients in one process (several ensembles, identities or sessions), every reply
    /// and event is then handled on the thread that waits for I/O, with no hop between runtime
    /// threads.
    ///
    /// A process forked from one that ran zklock cannot connect: `async-io`'s reactor (one per
    /// process, its epoll instance shared with the parent after a fork, its lock possibly held
    /// by a parent thread the child does not have) is unusable there, so that is refused at
    /// once with [`Error::Forked`] rather than left to time out.
    ///
    /// The crate's unit tests give each client its own runtime instead: some stall their
    /// client's runtime thread on purpose, which must not stall the tests running beside them.
    pub(crate) fn shared() -> Result<Arc<Runtime>> {
        static SHARED: parking_lot::Mutex<Weak<Runtime>> = parking_lot::Mutex::new(Weak::new());
        static FIRST_PID: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        match FIRST_PID.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst) {
            Err(first) if first != pid => return Err(Error::Forked),
            _ => {}
        }
        if cfg!(test) {
            return Runtime::start().map(Arc::new);
        }
        if let Some(runtime) = SHARED.lock().upgrade() {
            return Ok(runtime);
        }
        // Started without the lock held (a fork meanwhile must not find it taken).
        let started = Arc::new(Runtime::start()?);
        let mut shared = SHARED.lock();
        match shared.upgrade() {
            Some(runtime) => {
                drop(shared);
                drop(started); // Another caller was first: theirs is shared, ours stops.
                Ok(runtime)
            }
            None => {
                *shared = Arc::downgrade(&started);
                Ok(started)
            }
        }
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // Forked: the thread exists only in the parent (joining it would hang), and waking
            // it could take a lock that a parent thread held at the fork.
            std::mem::forget(self.thread.take());
            return;
        }
        self.stop.abort();
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() == thread::current().id() {
                // The last reference died inside a task on the runtime itself: the thread ends on
                // its own once the task returns.
                debug!("zklock runtime dropped from its own thread");
            } else if thread.join().is_err() {
                warn!("zklock runtime thread panicked");
            }
        }
    }
}

/// Spawns tasks on the runtime thread. Once the runtime has stopped, a spawned task is dropped
/// at once (its handle resolves to `None`); so is a task that panics (logged).
#[derive(Clone)]
pub(crate) struct Handle {
    executor: Weak<Executor<'static>>,
}

impl Handle {
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> JoinHandle<T> {
        let abort = Abort::default();
        let Some(executor) = self.executor.upgrade() else {
            abort.finish();
            return JoinHandle { task: None, abort };
        };
        let stop = abort.clone();
        let task = executor.spawn(async move {
            // The abort is looked at first: a task aborted before it ever ran does nothing.
            let run = futures_lite::future::or(
                async {
                    stop.aborted().await;
                    None
                },
                async { Some(future.await) },
            );
            // A panicking task ends alone, as on tokio; the runtime thread goes on.
            let output = AssertUnwindSafe(run).catch_unwind().await;
            stop.finish();
            output.unwrap_or_else(|_| {
                io_log!(Error, "a task on zklock's runtime panicked");
                None
            })
        });
        JoinHandle {
            task: Some(task.fallible()),
            abort,
        }
    }
}

/// A spawned task. Dropping the handle lets the task run on; [`abort`](Self::abort) drops its
/// future (on the runtime thread) at the next chance. Awaiting it gives the task's output, or
/// `None` if it was aborted or the runtime stopped.
pub(crate) struct JoinHandle<T> {
    task: Option<async_executor::FallibleTask<Option<T>>>,
    abort: Abort,
}

impl<T> JoinHandle<T> {
    pub(crate) fn abort(&self) {
        self.abort.abort();
    }

    pub(crate) fn abort_handle(&self) -> Abort {
        self.abort.clone()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match self.task.as_mut() {
            Some(task) => Pin::new(task).poll(cx).map(Option::flatten),
            None => Poll::Ready(None),
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

/// Stops a task (or the runtime) from any thread, and tells whether it has ended.
#[derive(Clone, Default)]
pub(crate) struct Abort(Arc<AbortState>);

#[derive(Default)]
struct AbortState {
    aborted: AtomicBool,
    finished: AtomicBool,
    event: Event,
}

impl Abort {
    pub(crate) fn abort(&self) {
        self.0.aborted.store(true, Ordering::SeqCst);
        self.0.event.notify(usize::MAX);
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.0.finished.load(Ordering::SeqCst)
    }

    fn finish(&self) {
        self.0.finished.store(true, Ordering::SeqCst);
    }

    async fn aborted(&self) {
        loop {
            if self.0.aborted.load(Ordering::SeqCst) {
                return;
            }
            let listener = self.0.event.listen();
            if self.0.aborted.load(Ordering::SeqCst) {
                return;
            }
            listener.await;
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
        let (tx, rx) = async_channel::bounded::<u32>(1);
        let recv = Box::pin(async move { rx.recv().await.ok() });
        let recv = match block_on(recv, Some(Instant::now() + Duration::from_millis(20))) {
            Err(recv) => recv,
            Ok(v) => panic!("resolved early: {v:?}"),
        };
        rt.handle().spawn(async move {
            futures_lite::future::yield_now().await;
            let _ = tx.send(7).await;
        });
        assert_eq!(block_on(recv, None).ok().flatten(), Some(7));
    }

    #[test]
    fn aborted_tasks_end_and_a_stopped_runtime_drops_new_ones() {
        let rt = Runtime::start().unwrap();
        let task = rt.handle().spawn(std::future::pending::<()>());
        let abort = task.abort_handle();
        assert!(!abort.is_finished());
        task.abort();
        assert_eq!(
            block_on(task, Some(Instant::now() + Duration::from_secs(5))).ok(),
            Some(None)
        );
        assert!(abort.is_finished());
        let handle = rt.handle().clone();
        drop(rt);
        let late = handle.spawn(async { 1 });
        assert_eq!(block_on(late, None).ok(), Some(None));
    }
}
