//! Timers for zklock's futures, whichever executor polls them.
//!
//! A thread that drives futures itself (zklock's runtime thread, or a caller blocked in
//! [`block_on`](crate::rt::runtime::block_on)) keeps a heap of its own: it parks until the earliest
//! timer anyway, so a sleep there costs no other thread. A future polled anywhere else (a
//! tokio or smol worker) registers with one process-wide `zklock-timer` thread, started on
//! first use, so that ten thousand waiting tasks cost one thread, not one each.

use std::cell::RefCell;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The instant `timeout` from now; far in the future for timeouts too large to represent.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

/// A future that is ready at `at`.
pub(crate) fn sleep_until(at: Instant) -> Sleep {
    Sleep { at, shared: None }
}

/// A future that is ready after `duration`.
pub(crate) fn sleep(duration: Duration) -> Sleep {
    sleep_until(deadline_after(duration))
}

/// See [`sleep_until`].
pub(crate) struct Sleep {
    at: Instant,
    /// Its entry in the process-wide heap, once registered there.
    shared: Option<Arc<Entry>>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        let at = self.at;
        // Registered at every poll on a driving thread (a spurious poll adds a duplicate that
        // only wakes the task once more); the heap drains as timers fire.
        let local = LOCAL.with(|l| match l.borrow_mut().as_mut() {
            Some(heap) => {
                heap.push(Timer {
                    at,
                    waker: cx.waker().clone(),
                });
                true
            }
            None => false,
        });
        if !local {
            match &self.shared {
                Some(entry) => entry.update(cx.waker()),
                None => self.shared = Some(Shared::get().add(at, cx.waker())),
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(entry) = self.shared.take() {
            entry.cancelled.store(true, Ordering::Relaxed);
            Shared::get().forget_one();
        }
    }
}

/// A wake-up at `at`; the heap's top is the earliest.
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

thread_local! {
    /// The timers of the driving thread this is (none on other threads).
    static LOCAL: RefCell<Option<BinaryHeap<Timer>>> = const { RefCell::new(None) };
}

/// Makes the calling thread keep the timers of the futures it polls, until dropped (the
/// thread's previous heap, if any, is put back then).
pub(crate) fn drive_here() -> Driving {
    let previous = LOCAL.with(|l| l.borrow_mut().replace(BinaryHeap::new()));
    Driving {
        previous,
        _this_thread: std::marker::PhantomData,
    }
}

/// See [`drive_here`].
pub(crate) struct Driving {
    previous: Option<BinaryHeap<Timer>>,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl Driving {
    /// Wakes the timers that are due; the earliest left.
    pub(crate) fn fire_due(&self) -> Option<Instant> {
        LOCAL.with(|l| {
            let mut heap = l.borrow_mut();
            let heap = heap.as_mut()?;
            let now = Instant::now();
            while let Some(due) = heap.peek_mut().filter(|t| t.at <= now) {
                std::collections::binary_heap::PeekMut::pop(due)
                    .waker
                    .wake();
            }
            heap.peek().map(|t| t.at)
        })
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        let previous = self.previous.take();
        LOCAL.with(|l| *l.borrow_mut() = previous);
    }
}

/// A timer of the process-wide heap.
struct Entry {
    at: Instant,
    waker: Mutex<Waker>,
    cancelled: AtomicBool,
}

impl Entry {
    fn update(&self, waker: &Waker) {
        let mut current = self.waker.lock();
        if !current.will_wake(waker) {
            *current = waker.clone();
        }
    }
}

struct Queued(Arc<Entry>);

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.0.at == other.0.at
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.at.cmp(&self.0.at) // earliest first
    }
}

/// The process-wide heap and its thread.
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Queued>,
    /// Entries dropped before they were due, still in the heap.
    cancelled: usize,
    /// The process the thread runs in: after a fork the child starts its own.
    pid: u32,
    running: bool,
}

/// Past this many cancelled entries (and half the heap), the heap is rebuilt without them, so
/// that timeouts far in the future, cancelled over and over, do not pile up.
const COMPACT_AFTER: usize = 1024;

impl Shared {
    fn get() -> &'static Shared {
        static SHARED: Shared = Shared {
            state: Mutex::new(State {
                heap: BinaryHeap::new(),
                cancelled: 0,
                pid: 0,
                running: false,
            }),
            changed: Condvar::new(),
        };
        &SHARED
    }

    fn add(&'static self, at: Instant, waker: &Waker) -> Arc<Entry> {
        let entry = Arc::new(Entry {
            at,
            waker: Mutex::new(waker.clone()),
            cancelled: AtomicBool::new(false),
        });
        let mut state = self.state.lock();
        let pid = std::process::id();
        if !state.running || state.pid != pid {
            // Inherited from a parent process, the heap's entries belong to its tasks.
            *state = State {
                pid,
                running: self.start(),
                ..State::default()
            };
            if !state.running {
                drop(state);
                waker.wake_by_ref(); // No thread: poll again rather than never.
                return entry;
            }
        }
        let earliest = state.heap.peek().is_none_or(|top| at < top.0.at);
        state.heap.push(Queued(entry.clone()));
        drop(state);
        if earliest {
            self.changed.notify_one();
        }
        entry
    }

    fn forget_one(&self) {
        let mut state = self.state.lock();
        state.cancelled += 1;
        if state.cancelled > COMPACT_AFTER && state.cancelled * 2 > state.heap.len() {
            let live: BinaryHeap<Queued> = std::mem::take(&mut state.heap)
                .into_iter()
                .filter(|q| !q.0.cancelled.load(Ordering::Relaxed))
                .collect();
            state.heap = live;
            state.cancelled = 0;
        }
    }

    fn start(&'static self) -> bool {
        std::thread::Builder::new()
            .name("zklock-timer".into())
            .spawn(move || self.run())
            .is_ok()
    }

    fn run(&self) {
        let mut state = self.state.lock();
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            let mut cancelled = 0;
            while let Some(top) = state.heap.peek_mut().filter(|top| top.0.at <= now) {
                let Queued(entry) = std::collections::binary_heap::PeekMut::pop(top);
                if entry.cancelled.load(Ordering::Relaxed) {
                    cancelled += 1;
                } else {
                    due.push(entry);
                }
            }
            state.cancelled = state.cancelled.saturating_sub(cancelled);
            if !due.is_empty() {
                // Woken without the lock: a waker may run user code (an executor's schedule).
                drop(state);
                for entry in due {
                    entry.waker.lock().wake_by_ref();
                }
                state = self.state.lock();
                continue;
            }
            match state.heap.peek().map(|top| top.0.at) {
                Some(at) => {
                    self.changed.wait_until(&mut state, at);
                }
                None => self.changed.wait(&mut state),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize, std::thread::Thread);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
            self.1.unpark();
        }
    }

    #[test]
    fn a_sleep_polled_off_any_driving_thread_is_woken_by_the_timer_thread() {
        let count = Arc::new(Count(AtomicUsize::new(0), std::thread::current()));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let started = Instant::now();
        let mut sleep = Box::pin(sleep(Duration::from_millis(30)));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        while count.0.load(Ordering::SeqCst) == 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "never woken");
            std::thread::park_timeout(Duration::from_millis(100));
        }
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn cancelled_sleeps_do_not_pile_up() {
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0), std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        for _ in 0..5 * COMPACT_AFTER {
            let mut sleep = Box::pin(sleep(Duration::from_secs(3600)));
            assert!(sleep.as_mut().poll(&mut cx).is_pending());
        }
        assert!(Shared::get().state.lock().heap.len() <= 2 * COMPACT_AFTER + 2);
    }

    #[test]
    fn a_driving_thread_keeps_its_own_timers() {
        let driving = drive_here();
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0), std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut sleep = Box::pin(sleep(Duration::from_millis(10)));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        assert!(
            sleep.shared.is_none(),
            "not registered with the timer thread"
        );
        let next = driving.fire_due().expect("a timer");
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        assert_eq!(driving.fire_due(), None);
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
    }
}
