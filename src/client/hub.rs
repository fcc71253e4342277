//! Each client has one thread of its own, `zklock-state`, that watches the session the way a
//! caller would (the transport's state watcher, plus the caller's clock for the lease), and on
//! every change logs it, updates the session metrics and hands it to the listener registered
//! with [`ClientBuilder::on_state_change`](crate::ClientBuilder::on_state_change). Nothing of
//! this runs on the runtime thread, which only wakes the watcher the way it wakes any waiting
//! caller. The listener runs on yet another thread (`zklock-listener`), fed by a channel, so a
//! slow listener delays neither the log lines nor the metrics.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::Poll;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use event_listener::{Event, EventListener};
use parking_lot::Mutex;

use crate::metrics;
use crate::rt::relay::io_log;
use crate::rt::runtime::block_on;
use crate::session::releases::Releases;
use crate::session::Session;
use crate::wire as zk;

use super::state::{next_look, of_session, SessionState, StateChange};

/// The log target of the state thread's lines, as the operating docs name it (it was this
/// code's module before the client had a folder of its own).
const LOG_TARGET: &str = "zklock::state";

/// A listener for [`StateChange`]s (see
/// [`ClientBuilder::on_state_change`](crate::ClientBuilder::on_state_change)).
#[derive(Clone)]
pub(crate) struct Listener(pub(crate) Arc<dyn Fn(&StateChange) + Send + Sync>);

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Listener")
    }
}

/// What a client observes and reports, as its builder set it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Observe {
    /// Adds the lock path as a `path` label to per-lock metrics.
    pub(crate) path_label: bool,
    pub(crate) listener: Option<Listener>,
}

/// Blocks the calling thread until the session's state changes, `replaced` or `releases` is
/// notified, or `deadline` passes.
pub(super) fn wait_any(
    watcher: Option<&mut zk::StateWatcher>,
    replaced: EventListener,
    releases: Option<EventListener>,
    deadline: Instant,
) {
    let any = wait_any_async(watcher, replaced, releases, deadline);
    let _ = block_on(Box::pin(any), None);
}

/// As [`wait_any`], awaited.
pub(super) async fn wait_any_async(
    watcher: Option<&mut zk::StateWatcher>,
    replaced: EventListener,
    releases: Option<EventListener>,
    deadline: Instant,
) {
    let mut changed = watcher.map(|w| Box::pin(w.changed()));
    let mut replaced = std::pin::pin!(replaced);
    let mut releases = releases.map(Box::pin);
    let mut timer = crate::rt::runtime::sleep_until(deadline);
    std::future::poll_fn(|cx| {
        let changed = changed
            .as_mut()
            .is_some_and(|c| c.as_mut().poll(cx).is_ready());
        let released = releases
            .as_mut()
            .is_some_and(|r| Pin::new(r).poll(cx).is_ready());
        let timed_out = Pin::new(&mut timer).poll(cx).is_ready();
        if changed || released || timed_out || replaced.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Shared by a client and its state thread.
pub(crate) struct Hub {
    /// Notified when the session is replaced or closed, and to stop the state thread.
    notify: Event,
    stop: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The state thread's id, also after its handle was taken.
    state_thread: Mutex<Option<thread::ThreadId>>,
    /// The listener's thread, if there is a listener.
    listener: Mutex<Option<ListenerThread>>,
    /// The process that started the threads: a forked child has no such threads.
    pid: u32,
}

/// How long closing or dropping a client waits for its listener to return from the changes
/// still being told (the last one, to `Closed`, included) before leaving its thread to finish
/// on its own.
pub(crate) const LISTENER_STOP_WAIT: Duration = Duration::from_secs(1);

/// The listener's thread, and how to learn that it has ended without joining it (a join
/// cannot be given a bound).
struct ListenerThread {
    thread: JoinHandle<()>,
    /// Disconnected once the thread is done (its sender is the last thing it drops).
    done: mpsc::Receiver<()>,
}

impl Hub {
    pub(crate) fn new() -> Arc<Hub> {
        Arc::new(Hub {
            notify: Event::new(),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            state_thread: Mutex::new(None),
            listener: Mutex::new(None),
            pid: std::process::id(),
        })
    }

    /// Registers the calling thread to be woken by the next [`notify`](Self::notify): taken
    /// before looking at the state, so that a change in between is not missed.
    pub(crate) fn listen(&self) -> EventListener {
        self.notify.listen()
    }

    /// Wakes everyone waiting for a state change to look again. Never blocks.
    pub(crate) fn notify(&self) {
        self.notify.notify(usize::MAX);
    }

    /// Starts the client's state thread, and the listener's if there is one. `client` gives
    /// the state thread the client while it looks (it keeps no client between looks, so that
    /// dropping the last clone ends it).
    ///
    /// The listener is handed over here and kept by its thread alone, not by the client: a
    /// listener that holds a clone of its client would otherwise keep the client alive (a
    /// cycle) even after `close()` ended its thread.
    pub(crate) fn start(
        self: &Arc<Self>,
        current: impl Fn() -> Option<Arc<Session>> + Send + 'static,
        releases: Arc<Releases>,
        listener: Option<Listener>,
        session_id: i64,
    ) {
        metrics::describe();
        let hub = self.clone();
        let listener = listener.and_then(|listener| {
            let (changes, thread) = start_listener(listener)?;
            *self.listener.lock() = Some(thread);
            Some(changes)
        });
        let spawned = thread::Builder::new()
            .name("zklock-state".into())
            .spawn(move || run_state_thread(&hub, current, &releases, listener, session_id));
        match spawned {
            Ok(thread) => {
                *self.state_thread.lock() = Some(thread.thread().id());
                *self.thread.lock() = Some(thread);
            }
            Err(err) => {
                log::warn!(target: LOG_TARGET, "zklock: no state thread ({err}): state changes are not logged or told")
            }
        }
    }

    /// Stops the state thread and waits for it (not when called on that thread itself, or in a
    /// forked child, which has no such thread). The state thread tells the listener its last
    /// change (to `Closed`) on its way out; see [`stop_listener`](Self::stop_listener).
    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.notify();
        let Some(thread) = self.thread.lock().take() else {
            return;
        };
        if self.pid != std::process::id() || thread.thread().id() == thread::current().id() {
            drop(thread); // Detached: it ends on its own.
        } else if thread.join().is_err() {
            log::warn!(target: LOG_TARGET, "zklock state thread panicked");
        }
    }

    /// After [`shutdown`](Self::shutdown): waits, at most `wait`, for the listener's thread to
    /// tell the changes still queued and end. A listener still busy after that is left to
    /// finish on its own thread, with a warning: a listener cannot be interrupted, and a
    /// `close()` or a drop must not hang on one. Not waited for on the listener's own thread
    /// (a listener that closes or drops its client), on the state thread, or in a forked
    /// child.
    pub(crate) fn stop_listener(&self, wait: Duration) {
        let Some(listener) = self.listener.lock().take() else {
            return;
        };
        let me = thread::current().id();
        let on_its_thread = listener.thread.thread().id() == me;
        // The last clone can also go on the state thread (it holds the client while it looks):
        // the listener's channel is open until that thread is done, so waiting there would
        // only run out the bound.
        let on_state_thread = *self.state_thread.lock() == Some(me);
        if self.pid != std::process::id() || on_its_thread || on_state_thread {
            return; // Detached: it ends once the state thread's sender is gone.
        }
        let started = Instant::now();
        match listener.done.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Done: the join only collects the thread.
                let _ = listener.thread.join();
            }
            Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => log::warn!(
                target: LOG_TARGET,
                "the zklock state listener is still running {:?} after its client was closed; \
                 its thread ends when the listener returns",
                started.elapsed()
            ),
        }
    }
}

/// What the state thread last saw and published.
struct Seen {
    state: SessionState,
    /// When `state` began.
    since: Instant,
    /// When the session last stopped being `Connected`.
    out_since: Instant,
    session_id: i64,
    /// The connection (not only the lease) was lost during this time out.
    lost_connection: bool,
    /// This client's contribution to the process-wide gauges.
    connected: f64,
    releases: usize,
}

/// The state thread: looks at the session whenever something may have changed, and publishes
/// every change.
fn run_state_thread(
    hub: &Hub,
    current: impl Fn() -> Option<Arc<Session>>,
    releases: &Releases,
    listener: Option<mpsc::Sender<StateChange>>,
    session_id: i64,
) {
    let now = Instant::now();
    let mut seen = Seen {
        state: SessionState::Connected,
        since: now,
        out_since: now,
        session_id,
        lost_connection: false,
        connected: 1.0,
        releases: 0,
    };
    metrics::register_all();
    metrics::connected(1.0);
    loop {
        let replaced = hub.notify.listen();
        let released = releases.changed.listen();
        let pending = releases.pending();
        if pending != seen.releases {
            metrics::background_releases(pending as f64 - seen.releases as f64);
            seen.releases = pending;
        }
        // None once the client is dropped, being dropped or closed.
        let session = match hub.stop.load(Ordering::SeqCst) {
            false => current(),
            true => None,
        };
        let mut watcher = session.as_ref().map(|s| s.state_watcher());
        let judged = session.as_deref().map(|s| (s, of_session(s)));
        let (now, id) = judged.map_or((SessionState::Closed, seen.session_id), |(s, (now, _))| {
            (now, s.id)
        });
        if session
            .as_ref()
            .is_some_and(|s| s.state() == zk::KeeperState::Disconnected)
        {
            seen.lost_connection = true;
        }
        if now != seen.state || id != seen.session_id {
            publish(&mut seen, now, id, listener.as_ref());
        }
        if now == SessionState::Closed {
            break;
        }
        let wake = judged.map_or(Instant::now(), |(s, (_, standing))| next_look(s, standing));
        drop(session);
        metrics::refresh_hold_ages();
        wait_any(
            watcher.as_mut(),
            replaced,
            Some(released),
            metrics::refresh_by(wake),
        );
    }
    // Take this client out of the process-wide gauges.
    metrics::connected(-seen.connected);
    metrics::background_releases(-(seen.releases as f64));
}

/// Logs the change from `seen` to `now` (on session `id`), updates the metrics and tells the
/// listener. Lines go through the log relay: a blocking logger must not hold up this thread.
fn publish(
    seen: &mut Seen,
    now: SessionState,
    id: i64,
    listener: Option<&mpsc::Sender<StateChange>>,
) {
    use SessionState::*;
    let at = Instant::now();
    let out = at - seen.out_since;
    let old = seen.session_id;
    // A session replaced between two looks expired in between.
    if id != old && seen.state != Expired {
        io_log!(
            target: LOG_TARGET,
            Warn,
            "zookeeper session {old:#x} expired: every lock held through it is lost"
        );
        metrics::expired();
    }
    match now {
        Connected => {
            if id != old {
                io_log!(
                    target: LOG_TARGET,
                    Info,
                    "zookeeper session {id:#x} replaces expired session {old:#x}; out for {out:?}"
                );
            } else {
                io_log!(target: LOG_TARGET, Info, "zookeeper session {id:#x} recovered after {out:?}");
            }
            if id != old || seen.lost_connection {
                metrics::reconnected();
            }
        }
        Suspended if seen.state == Connected => {
            let why = if seen.lost_connection {
                "connection lost"
            } else {
                "no answer from the server for 2/3 of the session timeout (the lease ran out)"
            };
            io_log!(
                target: LOG_TARGET,
                Info,
                "zookeeper session {id:#x} suspended: {why}; its locks read Suspended"
            );
        }
        Suspended => {}
        Expired => {
            io_log!(target: LOG_TARGET, Warn, "zookeeper session {id:#x} expired (out for {out:?}): every lock held through it is lost; the next call opens a new session");
            metrics::expired();
        }
        Closed => io_log!(target: LOG_TARGET, Info, "zookeeper session {id:#x} closed"),
    }
    let after = if now == Connected {
        out
    } else {
        at - seen.since
    };
    let connected = if now == Connected { 1.0 } else { 0.0 };
    if connected != seen.connected {
        metrics::connected(connected - seen.connected);
        seen.connected = connected;
    }
    if seen.state == Connected {
        seen.out_since = at;
    }
    if now == Connected {
        seen.lost_connection = false;
    }
    if let Some(listener) = listener {
        let _ = listener.send(StateChange {
            from: seen.state,
            to: now,
            session_id: id,
            after,
        });
    }
    seen.state = now;
    seen.since = at;
    seen.session_id = id;
}

/// Starts the listener's thread; it ends once the state thread drops the sender and every
/// change queued has been told.
fn start_listener(listener: Listener) -> Option<(mpsc::Sender<StateChange>, ListenerThread)> {
    let (changes, receiver) = mpsc::channel::<StateChange>();
    let (done, finished) = mpsc::channel::<()>();
    let spawned = thread::Builder::new()
        .name("zklock-listener".into())
        .spawn(move || {
            for change in receiver {
                // A panicking listener is told the next change all the same.
                let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    (listener.0)(&change)
                }));
                if told.is_err() {
                    io_log!(target: LOG_TARGET, Warn, "the zklock state listener panicked on {change:?}");
                }
            }
            // The listener first: whatever it holds (a client clone, say) is gone by the time
            // a close or drop waiting for this thread returns.
            drop(listener);
            drop(done);
        });
    match spawned {
        Ok(thread) => Some((
            changes,
            ListenerThread {
                thread,
                done: finished,
            },
        )),
        Err(err) => {
            log::warn!(target: LOG_TARGET, "zklock: no listener thread ({err}): state changes are not told");
            None
        }
    }
}
