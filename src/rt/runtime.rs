//! zklock's own async runtime thread, its timers, and blocking waits on futures with a
//! deadline.
//!
//! The session's network I/O has threads of its own (`wire`); this thread runs zklock's
//! background tasks: keepalives, the watches that wake blocked waiters, background releases.
//! It is a single-threaded executor driven by a plain park/unpark loop with a timer heap, so
//! it holds no process-wide state: a process forked from one that used zklock can start its
//! own. A completion filled on an I/O thread wakes the task (or the parked caller) directly.

use std::cell::RefCell;
use std::collections::BinaryHeap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use async_executor::Executor;
use event_listener::Event;
use futures_lite::FutureExt;
use log::{debug, warn};

use crate::error::{Error, Result};
use crate::rt::relay::io_log;

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
                drive(executor.run(stopped.aborted()));
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
    /// A process forked from one that ran zklock starts a runtime of its own: the parent's
    /// thread does not exist in the child.
    pub(crate) fn shared() -> Result<Arc<Runtime>> {
        /// The shared runtime and the process it was started in.
        static SHARED: parking_lot::Mutex<(u32, Weak<Runtime>)> =
            parking_lot::Mutex::new((0, Weak::new()));
        let pid = std::process::id();
        let ours = |shared: &(u32, Weak<Runtime>)| {
            // A runtime of the parent process, inherited by a fork, has no thread here.
            (shared.0 == pid).then(|| shared.1.upgrade()).flatten()
        };
        if let Some(runtime) = ours(&SHARED.lock()) {
            return Ok(runtime);
        }
        // Started without the lock held (a fork meanwhile must not find it taken).
        let started = Arc::new(Runtime::start()?);
        let mut shared = SHARED.lock();
        match ours(&shared) {
            Some(runtime) => {
                drop(shared);
                drop(started); // Another caller was first: theirs is shared, ours stops.
                Ok(runtime)
            }
            None => {
                *shared = (pid, Arc::downgrade(&started));
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

thread_local! {
    /// The timers of the runtime thread this is (none on other threads).
    static TIMERS: RefCell<Option<BinaryHeap<Timer>>> = const { RefCell::new(None) };
}

/// A task's wake-up at `at`; the heap's top is the earliest.
struct Timer {
    at: Instant,
    waker: Waker,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Timer {}

impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at) // earliest first
    }
}

/// Runs `future` (the executor) on this thread, parking between polls until woken or until
/// the earliest timer a task set on this thread is due.
fn drive<F: Future>(future: F) -> F::Output {
    TIMERS.with(|t| *t.borrow_mut() = Some(BinaryHeap::new()));
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            TIMERS.with(|t| *t.borrow_mut() = None);
            return output;
        }
        let next = TIMERS.with(|t| {
            let mut timers = t.borrow_mut();
            let timers = timers.as_mut()?; // Set above, for as long as this loop runs.
            let now = Instant::now();
            while let Some(due) = timers.peek_mut().filter(|t| t.at <= now) {
                std::collections::binary_heap::PeekMut::pop(due)
                    .waker
                    .wake();
            }
            timers.peek().map(|t| t.at)
        });
        match next {
            // A timer just fired if the earliest left is not the one we would wait for: the
            // executor was woken and the next poll runs it; parking returns at once then.
            Some(at) => thread::park_timeout(at.saturating_duration_since(Instant::now())),
            None => thread::park(),
        }
    }
}

/// A future that is ready at `at`. On zklock's runtime thread the runtime's loop wakes it; on
/// any other thread a short-lived thread does.
pub(crate) fn sleep_until(at: Instant) -> Sleep {
    Sleep { at, armed: false }
}

/// A future that is ready after `duration`.
pub(crate) fn sleep(duration: Duration) -> Sleep {
    sleep_until(deadline_after(duration))
}

/// See [`sleep_until`].
pub(crate) struct Sleep {
    at: Instant,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        let at = self.at;
        let on_runtime = TIMERS.with(|t| match t.borrow_mut().as_mut() {
            Some(timers) => {
                // Registered at every poll (a spurious poll adds a duplicate that only wakes
                // the task once more); the heap drains as timers fire.
                timers.push(Timer {
                    at,
                    waker: cx.waker().clone(),
                });
                true
            }
            None => false,
        });
        if !on_runtime && !self.armed {
            self.armed = true;
            let waker = cx.waker().clone();
            let spawned = thread::Builder::new()
                .name("zklock-timer".into())
                .spawn(move || {
                    thread::sleep(at.saturating_duration_since(Instant::now()));
                    waker.wake();
                });
            if spawned.is_err() {
                cx.waker().wake_by_ref(); // Poll again rather than never.
            }
        }
        Poll::Pending
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
        if crate::rt::cancel::interrupted() {
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
