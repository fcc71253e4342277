//! The connection engine: one I/O thread per ZooKeeper session reads replies and
//! notifications, sends pings, and reconnects, keeping the session across connections.
//! Callers queue their requests in an outbox and write them themselves. Here is what the
//! session's handles and its threads share, and the session's life: opened, connected,
//! disconnected, closed. [`handshake`] establishes the session on one connection (with a
//! [`Config`]), [`outbox`] holds the requests from their call to their answer and keeps their
//! order, [`send`] queues and writes them, [`io_thread`] reads, pings and reconnects,
//! [`settle`] answers the callers of a `multi` or `multiRead`, and each caller gets an
//! [`Answer`].
//!
//! Replies are matched to requests by a FIFO, not by xid: the server answers one session's
//! requests in order, and several SetWatches share xid -8.

mod bundle;
pub(crate) mod coalesce;
mod config;
mod handshake;
mod io_thread;
mod known_parents;
mod multi;
mod outbox;
mod reply;
mod send;
mod settle;

pub(crate) use config::Config;
pub(crate) use reply::{Answer, OnReply};
pub(crate) use send::Cork;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::attempt::AttemptError;
use super::error::Error;
use super::events::{self, KeeperState, StateCell, WatchKind, Watches};
use super::hosts::Rotation;
use super::jute::Writer;
use super::link::{Closer, Link, Sink};
use super::proto::{op, xid, SET_WATCHES_MAX_BYTES};
use crate::rt::relay::io_log;

use handshake::{attempt, Established};
use outbox::Outbox;
use reply::Learned;

/// The socket's write side. Held from a batch's take to the end of its write, so the order of
/// the takes is the order on the wire.
struct Out {
    sink: Option<Box<dyn Sink>>,
    closer: Option<Closer>,
    /// Bumped whenever a connection is given up, so a late re-arm cannot install a dead one.
    generation: u64,
}

/// What the session's handles and its I/O thread share.
pub(crate) struct Shared {
    /// Lock order: `out`, then `outbox` (and `watches` or `writer_kick` before `outbox`).
    /// `outbox` is never held across a write nor while a caller's code runs, so the I/O
    /// thread, which takes only `outbox` to match a reply, never waits for a caller blocked
    /// in a write (the server not reading); it takes `out` only when free, for a ping, and
    /// leaves requests to the writer thread.
    out: Mutex<Out>,
    outbox: Mutex<Outbox>,
    last_send: Mutex<Instant>,
    pub(crate) watches: Mutex<Watches>,
    pub(crate) state: Arc<StateCell>,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
    /// What replies told the session (which lock paths exist, whether it was closed).
    pub(crate) learned: Learned,
    /// Whether reads may go out together in a `multiRead` (see [`bundle`]): cleared when
    /// the server does not answer one as a `multiRead`.
    multi_read: AtomicBool,
    /// The session timeout granted on the latest connection, in milliseconds: the server
    /// expires the session by the one it granted last.
    timeout_ms: AtomicU64,
    last_zxid: AtomicI64,
    closing: AtomicBool,
    /// The server of the latest connection (see [`Established::server`]), for messages.
    server: Mutex<String>,
    /// Wakes the I/O thread from a reconnect pause when the session is closed.
    closed: (Mutex<bool>, Condvar),
    /// Told, on the I/O thread, when each new connection's handshake was sent: the server
    /// took the session back after that instant, so it cannot expire it before one timeout
    /// later. Must not block.
    on_proof: Mutex<Option<ProofHook>>,
    /// The I/O thread, joined by [`join_io`](Self::join_io) once the session is over.
    io_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The I/O thread's id: it never writes requests (see [`flush`](Self::flush)).
    io_thread_id: std::sync::OnceLock<std::thread::ThreadId>,
    /// Wakes the writer thread (see [`write_queued`](Self::write_queued)): `(kicked, stop)`.
    writer_kick: (Mutex<(bool, bool)>, Condvar),
    /// The writer thread, joined by the I/O thread as it ends.
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    config: Config,
}

/// Called with the send time of a handshake that re-established the session, and the timeout
/// the server granted on it.
pub(crate) type ProofHook = Arc<dyn Fn(Instant, Duration) + Send + Sync>;

/// How long closing waits for the server to confirm CloseSession.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

impl Shared {
    /// A session's shared state before its first connection is installed: outbox closed,
    /// state `Disconnected`, nothing pending.
    fn new(
        config: Config,
        session_id: i64,
        password: Vec<u8>,
        timeout: Duration,
        server: String,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            out: Mutex::new(Out {
                sink: None,
                closer: None,
                generation: 0,
            }),
            outbox: Mutex::new(Outbox::new(config.max_reply)),
            last_send: Mutex::new(Instant::now()),
            watches: Mutex::new(Watches::default()),
            state: StateCell::new(KeeperState::Disconnected),
            session_id,
            learned: Learned::new(),
            multi_read: AtomicBool::new(true),
            password,
            timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
            last_zxid: AtomicI64::new(0),
            closing: AtomicBool::new(false),
            server: Mutex::new(server),
            closed: (Mutex::new(false), Condvar::new()),
            on_proof: Mutex::new(None),
            io_thread: Mutex::new(None),
            io_thread_id: std::sync::OnceLock::new(),
            writer_kick: (Mutex::new((false, false)), Condvar::new()),
            writer: Mutex::new(None),
            config,
        })
    }

    /// Waits until the I/O thread has ended (the session is over), at most until `deadline`;
    /// `true` if it has. Never waits on the I/O thread itself.
    pub(crate) fn join_io(&self, deadline: Instant) -> bool {
        let Some(thread) = self.io_thread.lock().take() else {
            return true;
        };
        if thread.thread().id() == std::thread::current().id() {
            return false;
        }
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                *self.io_thread.lock() = Some(thread);
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = thread.join();
        true
    }

    pub(crate) fn on_proof(&self, hook: ProofHook) {
        *self.on_proof.lock() = Some(hook);
    }

    /// The server of the latest connection, for messages.
    pub(crate) fn server(&self) -> String {
        self.server.lock().clone()
    }

    /// The session timeout the server granted on the latest connection.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::SeqCst))
    }

    /// Whether the server confirmed our CloseSession.
    pub(crate) fn close_confirmed(&self) -> bool {
        self.learned.close_confirmed.load(Ordering::SeqCst)
    }

    /// The highest zxid seen in a reply.
    pub(crate) fn last_zxid(&self) -> i64 {
        self.last_zxid.load(Ordering::SeqCst)
    }

    /// Closes the session: CloseSession if connected (the server then removes our ephemeral
    /// nodes at once), every waiter woken with `ClientClosed`. Returns at once; the I/O thread
    /// ends within [`CLOSE_WAIT`].
    pub(crate) fn close(&self) {
        if self.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut w = Writer::frame();
        w.int(0).int(op::CLOSE_SESSION);
        // Behind every request already queued: the server answers them before it closes.
        let queued = self.enqueue_any(
            w.finish(),
            Box::new(|answer| {
                if let Answer::Reply { err, learned, .. } = answer {
                    learned.close_confirmed.store(err == 0, Ordering::SeqCst);
                    learned.close_answered.store(true, Ordering::SeqCst);
                }
                Ok(())
            }),
            false,
        );
        if queued.is_ok() {
            self.flush();
        } else {
            self.finish(KeeperState::Closed);
        }
        *self.closed.0.lock() = true;
        self.closed.1.notify_all();
    }

    /// Ends the session for good: fails every pending request, fires every watcher with the
    /// session's end, closes the socket.
    fn finish(&self, state: KeeperState) {
        self.state.set(state);
        let err = terminal_error(self.state.get());
        self.drop_connection(&err);
        let fired = self.watches.lock().take_all();
        events::deliver_end(fired);
    }

    /// The connection is gone: fail what was in flight, mark the session disconnected.
    fn disconnected(&self) {
        self.drop_connection(&Error::ConnectionLoss);
        if !self.closing.load(Ordering::SeqCst) {
            self.state.set(KeeperState::Disconnected);
        }
    }

    /// Closes the socket and tells the caller of every request in flight or queued that its
    /// answer is lost with `err`.
    fn drop_connection(&self, err: &Error) {
        let callers = {
            let mut out = self.out.lock();
            out.sink = None;
            out.generation += 1;
            if let Some(closer) = out.closer.take() {
                closer.close();
            }
            self.outbox.lock().drop_connection()
        };
        for on_reply in callers {
            let _ = on_reply(Answer::Lost(err.clone()));
        }
    }

    /// A new connection is up: installs it, sets every watch again (in SetWatches requests of
    /// bounded size, each matched in order), then lets callers in. With watches to set, that
    /// is done on a thread of its own: it may write megabytes, and meanwhile the I/O thread
    /// must go on reading what the server answers and fires.
    fn connected(self: &Arc<Self>, sink: Box<dyn Sink>, closer: Closer) {
        // The handshake was traffic: no ping is due before the connection is even installed.
        *self.last_send.lock() = Instant::now();
        let generation = self.out.lock().generation;
        let (data, child) = self.watches.lock().armed();
        let chunks = chunk_watches(data, child);
        if chunks.is_empty() {
            self.install(generation, sink, closer, Vec::new());
            return;
        }
        let shared = self.clone();
        let spawned = std::thread::Builder::new()
            .name("zklock-rearm".into())
            .spawn(move || shared.install(generation, sink, closer, chunks));
        if let Err(e) = spawned {
            io_log!(
                Warn,
                "cannot start a thread to set watches again ({e}); reconnecting"
            );
            self.drop_connection(&Error::ConnectionLoss);
        }
    }

    /// Installs the connection of `generation` unless it was given up meanwhile, sends the
    /// SetWatches `chunks` first, then marks the session connected.
    fn install(
        &self,
        generation: u64,
        sink: Box<dyn Sink>,
        closer: Closer,
        chunks: Vec<(Vec<String>, Vec<String>)>,
    ) {
        let mut out = self.out.lock();
        if out.generation != generation || self.closing.load(Ordering::SeqCst) {
            closer.close();
            return;
        }
        out.sink = Some(sink);
        out.closer = Some(closer);
        let zxid = self.last_zxid();
        for (data, child) in chunks {
            let mut w = Writer::frame();
            w.int(xid::SET_WATCHES).int(op::SET_WATCHES);
            w.long(zxid)
                .strings(&data)
                .strings(&[] as &[String])
                .strings(&child);
            let frame = w.finish();
            self.outbox.lock().written_aside(
                xid::SET_WATCHES,
                Box::new(|answer| {
                    if let Answer::Reply { err, .. } = answer {
                        if err != 0 {
                            io_log!(Warn, "the server refused to set watches again: error {err}");
                        }
                    }
                    Ok(())
                }),
            );
            if !self.write(&mut out, &frame) {
                return; // The I/O thread sees the socket close and reconnects.
            }
        }
        *self.last_send.lock() = Instant::now();
        self.outbox.lock().open();
        // Still under `out`: a connection given up meanwhile bumped the generation first, and
        // one given up after this waits for the lock, then marks the session Disconnected.
        self.state.set(KeeperState::SyncConnected);
        drop(out);
        // Requests queued since the outbox opened found `out` taken: write them.
        self.flush();
    }

    fn last_send(&self) -> Instant {
        *self.last_send.lock()
    }
}

pub(crate) fn terminal_error(state: KeeperState) -> Error {
    match state {
        KeeperState::AuthFailed => Error::AuthFailed,
        KeeperState::Closed => Error::ClientClosed,
        _ => Error::SessionExpired,
    }
}

/// Splits the watch paths into SetWatches requests of at most [`SET_WATCHES_MAX_BYTES`] of
/// paths each.
fn chunk_watches(data: Vec<String>, child: Vec<String>) -> Vec<(Vec<String>, Vec<String>)> {
    let mut chunks = Vec::new();
    let (mut d, mut c, mut bytes) = (Vec::new(), Vec::new(), 0);
    let all = data
        .into_iter()
        .map(|p| (WatchKind::Data, p))
        .chain(child.into_iter().map(|p| (WatchKind::Child, p)));
    for (kind, path) in all {
        let size = path.len() + 4;
        if bytes + size > SET_WATCHES_MAX_BYTES && bytes > 0 {
            chunks.push((std::mem::take(&mut d), std::mem::take(&mut c)));
            bytes = 0;
        }
        bytes += size;
        match kind {
            WatchKind::Data => d.push(path),
            WatchKind::Child => c.push(path),
        }
    }
    if bytes > 0 {
        chunks.push((d, c));
    }
    chunks
}

/// Opens a new session with one pass over the hosts, before `deadline`; the session's I/O
/// thread is running when this returns. The error says why each host gave none.
pub(crate) fn open(config: Config, deadline: Instant) -> Result<Arc<Shared>, Error> {
    let mut rotation = Rotation::new(config.hosts.clone(), config.resolver.clone());
    let mut failures = Vec::new();
    // A new session: id 0 and an empty password ask the server for one.
    let no_password = [0; 16];
    for _ in 0..rotation.len() {
        let host = rotation.next();
        if Instant::now() >= deadline {
            break;
        }
        // Each host gets a share of the time, so one that swallows packets does not use it up.
        let share = (config.session_timeout / rotation.len() as u32).max(Duration::from_secs(1));
        let until = Instant::now()
            .checked_add(share)
            .map_or(deadline, |u| deadline.min(u));
        match attempt(&config, &rotation, &host, (0, &no_password), 0, until) {
            Ok(established) => return Ok(start(config, rotation, established)),
            Err(AttemptError::AuthFailed) => return Err(Error::AuthFailed),
            Err(AttemptError::Expired) => return Err(Error::SessionExpired),
            Err(AttemptError::Tls(why)) => failures.push(format!("{}: TLS: {why}", host.entry)),
            Err(AttemptError::Io(e)) => failures.push(format!("{}: {e}", host.entry)),
        }
    }
    Err(Error::NoSession(if failures.is_empty() {
        "the connect deadline passed".into()
    } else {
        failures.join("; ")
    }))
}

fn start(config: Config, rotation: Rotation, established: Established) -> Arc<Shared> {
    let timeout = Duration::from_millis(established.response.timeout_ms as u64);
    let Established {
        link,
        frames,
        response,
        server,
        ..
    } = established;
    let shared = Shared::new(
        config,
        response.session_id,
        response.password.clone(),
        timeout,
        server,
    );
    let Link {
        sink,
        source,
        closer,
    } = link;
    let reader_closer = Closer::clone_of(&closer);
    // No watch exists yet, so this sends nothing but installs the connection.
    shared.connected(sink, closer);
    let writer_shared = shared.clone();
    let writer = std::thread::Builder::new()
        .name("zklock-write".into())
        .spawn(move || writer_shared.write_queued());
    let writer = match writer {
        Ok(writer) => writer,
        Err(e) => {
            io_log!(Error, "cannot start the session's writer thread: {e}");
            shared.finish(KeeperState::Closed);
            return shared;
        }
    };
    *shared.writer.lock() = Some(writer);
    let thread_shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("zklock-io".into())
        .spawn(move || {
            let _ = thread_shared.io_thread_id.set(std::thread::current().id());
            thread_shared
                .clone()
                .serve_session(rotation, source, frames, reader_closer);
            thread_shared.stop_writer();
        });
    match spawned {
        Ok(thread) => *shared.io_thread.lock() = Some(thread),
        Err(e) => {
            io_log!(Error, "cannot start the session's I/O thread: {e}");
            shared.finish(KeeperState::Closed);
            shared.stop_writer();
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_watches_are_split_under_the_size_limit() {
        let long = "/".to_owned() + &"x".repeat(289);
        let data: Vec<String> = (0..10_000).map(|i| format!("{long}{i}")).collect();
        let chunks = chunk_watches(data.clone(), vec!["/c".into()]);
        assert!(chunks.len() > 1);
        let mut seen = 0;
        for (d, c) in &chunks {
            let bytes: usize = d.iter().chain(c).map(|p| p.len() + 4).sum();
            assert!(bytes <= SET_WATCHES_MAX_BYTES, "{bytes}");
            seen += d.len() + c.len();
        }
        assert_eq!(seen, 10_001);
        assert!(chunk_watches(Vec::new(), Vec::new()).is_empty());
    }
}
