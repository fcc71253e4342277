//! zklock's own async runtime thread, its timers, and blocking waits on futures with a
//! deadline.
//!
//! The session's network I/O has threads of its own (`wire`); this thread runs zklock's
//! background tasks: keepalives, the watches that wake blocked waiters, background releases.
//! It is a single-threaded executor driven by a plain park/unpark loop with a timer heap, so
//! it holds no process-wide state: a process forked from one that used zklock can start its
//! own. A completion filled on an I/O thread wakes the task (or the parked caller) directly.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use async_executor::Executor;
use event_listener::Event;
use futures_lite::FutureExt;
use log::{debug, warn};

use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;
use crate::rt::park::Parker;
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

/// Runs `future` (the executor) on this thread, parking between polls until woken or until
/// the earliest timer a task set on this thread is due.
fn drive<F: Future>(future: F) -> F::Output {
    let driving = crate::rt::timer::drive_here();
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        match driving.fire_due() {
            // A timer just fired if the earliest left is not the one we would wait for: the
            // executor was woken and the next poll runs it; parking returns at once then.
            Some(at) => thread::park_timeout(at.saturating_duration_since(Instant::now())),
            None => thread::park(),
        }
    }
}

pub(crate) use crate::rt::timer::{deadline_after, sleep, sleep_until};

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs the blocking `work` on a short-lived thread named `name` and awaits its result: for
/// the rare blocking steps of an async call (opening a session, closing one), so that no
/// async runtime's worker thread blocks on them.
pub(crate) async fn on_thread<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    struct Slot<T> {
        value: parking_lot::Mutex<Option<T>>,
        done: Event,
    }
    let slot = Arc::new(Slot {
        value: parking_lot::Mutex::new(None),
        done: Event::new(),
    });
    let filled = slot.clone();
    thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let value = work();
            *filled.value.lock() = Some(value);
            filled.done.notify(usize::MAX);
        })
        .map_err(|e| Error::Runtime {
            reason: format!("cannot spawn a thread: {e}"),
        })?;
    loop {
        if let Some(value) = slot.value.lock().take() {
            return Ok(value);
        }
        let listener = slot.done.listen();
        if let Some(value) = slot.value.lock().take() {
            return Ok(value);
        }
        listener.await;
    }
}

/// Polls `future` on the calling thread, waiting on the thread's [`Parker`] between polls,
/// until it completes or `deadline` passes. Then the future is handed back unfinished, so the
/// caller can decide whether to drop it or let a background task finish it (a request already
/// sent may still execute). Timers the future sets are kept by this thread while it waits.
///
/// This is how every blocking call of zklock waits: on the same futures its async calls
/// return, woken by the completion of a request or the watch it waits for.
pub(crate) fn block_on<F: Future + Unpin>(
    future: F,
    deadline: Option<Instant>,
) -> Result<F::Output, F> {
    block_on_or_stop(future, deadline, &[])
}

/// As [`block_on`], also handing the future back as soon as one of `stops` is cancelled (a
/// cancel wakes the thread).
pub(crate) fn block_on_or_stop<F: Future + Unpin>(
    future: F,
    deadline: Option<Instant>,
    stops: &[CancelToken],
) -> Result<F::Output, F> {
    let _on_cancel = crate::rt::cancel::unpark_on_cancel(stops);
    if crate::rt::worker::check_blocking_call() {
        #[cfg(feature = "tokio")]
        return tokio::task::block_in_place(|| park_on(future, deadline, stops));
    }
    park_on(future, deadline, stops)
}

/// [`block_on_or_stop`]'s wait, on the calling thread.
fn park_on<F: Future + Unpin>(
    mut future: F,
    deadline: Option<Instant>,
    stops: &[CancelToken],
) -> Result<F::Output, F> {
    let parker = Parker::current();
    let waker = Waker::from(parker.clone());
    let mut cx = Context::from_waker(&waker);
    let driving = crate::rt::timer::drive_here();
    loop {
        if let Poll::Ready(output) = pin!(&mut future).poll(&mut cx) {
            return Ok(output);
        }
        if stops.iter().any(CancelToken::is_cancelled) {
            return Err(future);
        }
        let timer = driving.fire_due();
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(future);
        }
        let until = match (deadline, timer) {
            (Some(d), Some(t)) => Some(d.min(t)),
            (d, t) => d.or(t),
        };
        parker.park_until(until);
    }
}

/// `op`'s output, or `op` handed back unfinished once `deadline` has passed.
pub(crate) async fn until<F: Future + Unpin>(
    mut op: F,
    deadline: Option<Instant>,
) -> std::result::Result<F::Output, F> {
    let Some(deadline) = deadline else {
        return Ok((&mut op).await);
    };
    let mut timer = sleep_until(deadline);
    let output = std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = Pin::new(&mut op).poll(cx) {
            return Poll::Ready(Some(output));
        }
        Pin::new(&mut timer).poll(cx).map(|()| None)
    })
    .await;
    output.ok_or(op)
}

/// Runs `op` on the calling thread until it is done (the blocking form of an async
/// operation, bounded by its own deadline), stopped as soon as one of `stops` is cancelled:
/// `op` is then dropped, which cleans up what it began, and the call ends as the token says
/// ([`Error::Closed`] for a client's own token, else [`Error::Cancelled`]).
pub(crate) fn blocking_or_stop<T>(
    op: impl Future<Output = Result<T>>,
    stops: &[CancelToken],
) -> Result<T> {
    let mut op = std::pin::pin!(op);
    block_on_or_stop(op.as_mut(), None, stops).unwrap_or_else(|_| {
        // Handed back unfinished: no deadline was given, so a token stopped it.
        Err(crate::rt::cancel::stopped(stops).unwrap_or_else(Error::connection_loss))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
