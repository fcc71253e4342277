//! The session engine: one I/O thread per session reads replies and notifications, sends
//! pings, and reconnects. Callers queue their requests in an outbox, in the order of their
//! calls, which is the order of execution; whichever caller finds the socket free writes what
//! the outbox holds, so no caller waits for another's write, and a writer thread writes what
//! had to wait for room on the wire.
//!
//! Replies are matched to requests by a FIFO, not by xid: the server answers one session's
//! requests in order, and several SetWatches share xid -8.
//!
//! Liveness traffic never waits behind bulk traffic: at most [`MAX_IN_FLIGHT`] requests are on
//! the wire unanswered, the rest wait in the outbox, and a ping or a keepalive sync goes out
//! ahead of them, so its answer waits for no more than that many others.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::attempt::{read_frame, AttemptError};
use super::completion::{self, Completion, Slot};
use super::hosts::{Host, Rotation};
use super::jute::{Malformed, Reader, Writer};
use super::link::{self, Closer, Frames, Link, Read1, Sink};
use super::proto::{
    op, xid, ConnectRequest, ConnectResponse, Notification, ReplyHeader, MAX_FRAME,
    SET_WATCHES_MAX_BYTES,
};
use super::watches::{self, Kind, SessionState, StateCell, Unwatch, Watches};
use super::Error;
use crate::rt::relay::io_log;

/// What a session is opened with.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) hosts: Vec<Host>,
    pub(crate) resolver: Arc<dyn super::hosts::Resolve>,
    pub(crate) session_timeout: Duration,
    /// `(scheme, credential)` pairs sent as auth packets on every connection.
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<super::tls::TlsConfig>>,
    #[cfg(feature = "sasl")]
    pub(crate) sasl: Option<(String, String)>,
}

/// Decodes a reply for its request and fills the caller's completion. `Err` if the reply does
/// not decode: the connection is then reset.
pub(crate) type OnReply = Box<dyn FnOnce(Answer<'_>) -> Result<(), Malformed> + Send>;

/// What a pending request gets.
pub(crate) enum Answer<'a> {
    Reply {
        err: i32,
        body: Reader<'a>,
        shared: &'a Arc<Shared>,
    },
    /// No reply will come: the connection or the session ended first.
    Lost(Error),
}

struct Pending {
    xid: i32,
    on_reply: OnReply,
}

/// The write side. Requests are queued as pending under this lock as they are written, so the
/// order of the FIFO is the order on the wire.
struct Out {
    sink: Option<Box<dyn Sink>>,
    closer: Option<Closer>,
    /// Bumped whenever a connection is given up, so a late re-arm cannot install a dead one.
    generation: u64,
}

/// Requests accepted and not yet written.
struct Outbox {
    /// Requests are accepted: a connection is installed and its watches are set again.
    open: bool,
    next_xid: i32,
    /// In the order they go out: urgent ones at the front, the others in the order of the
    /// calls.
    queue: VecDeque<Outgoing>,
}

struct Outgoing {
    frame: Vec<u8>,
    pending: Pending,
    /// Goes out ahead of the others, and even with [`MAX_IN_FLIGHT`] unanswered.
    urgent: bool,
}

/// How many requests may be on the wire unanswered. The server answers one session's requests
/// one after another, so a request written behind N others waits for all of them: 2,000
/// waiters re-listing after a reconnect once kept a keepalive sync waiting for two seconds,
/// and their holder read `Suspended` on a healthy session. A few hundred keep the server
/// busy all the same.
const MAX_IN_FLIGHT: usize = 256;

/// How often the writer thread looks at the outbox without being told to.
const WRITER_NET: Duration = Duration::from_millis(100);

/// How many bytes one write takes from the outbox at most.
const MAX_BATCH: usize = 256 * 1024;

/// What the session's handles and its I/O thread share.
pub(crate) struct Shared {
    /// Lock order: `out`, then `outbox`, then `pending` (and `watches` or `writer_kick` before
    /// `outbox`). The I/O thread takes only `pending` to match a reply, so a caller blocked
    /// in a write (the server not reading) never stops the replies from being read; it takes
    /// `out` only when free, for a ping, and leaves requests to the writer thread.
    out: Mutex<Out>,
    outbox: Mutex<Outbox>,
    pending: Mutex<VecDeque<Pending>>,
    last_send: Mutex<Instant>,
    pub(crate) watches: Mutex<Watches>,
    pub(crate) state: Arc<StateCell>,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
    /// The session timeout granted on the latest connection, in milliseconds: the server
    /// expires the session by the one it granted last.
    timeout_ms: AtomicU64,
    last_zxid: AtomicI64,
    closing: AtomicBool,
    /// The server of the latest connection (see [`Established::server`]), for messages.
    server: Mutex<String>,
    /// The server answered our CloseSession: the session and its ephemeral nodes are gone.
    close_confirmed: AtomicBool,
    /// The server answered our CloseSession (whatever it said).
    close_answered: AtomicBool,
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
    /// Wakes the writer thread (see [`write_queued`]): `(kicked, stop)`.
    writer_kick: (Mutex<(bool, bool)>, Condvar),
    /// The writer thread, joined by the I/O thread as it ends.
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    config: Config,
}

/// Called with the send time of a handshake that re-established the session, and the timeout
/// the server granted on it.
pub(crate) type ProofHook = Arc<dyn Fn(Instant, Duration) + Send + Sync>;

/// A connection that dies sooner than this after its handshake counts toward a reconnect storm.
const STORM_LIFETIME: Duration = Duration::from_secs(1);

/// How long closing waits for the server to confirm CloseSession.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

impl Shared {
    /// Queues a request in the outbox (ahead of the others if `urgent`): `write` fills its
    /// body, `on_reply` reads the reply. Fails at once with ConnectionLoss while not connected
    /// (the caller decides when to send again; a request queued for a later connection could
    /// run long after its caller gave up). Then writes what the outbox holds, unless another
    /// thread is writing (that one writes it).
    fn queue(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        on_reply: OnReply,
        urgent: bool,
    ) -> Result<(), (OnReply, Error)> {
        self.queue_only(opcode, write, on_reply, urgent)?;
        self.flush();
        Ok(())
    }

    /// Queues a request without writing it (the caller calls [`flush`](Self::flush)).
    fn queue_only(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        on_reply: OnReply,
        urgent: bool,
    ) -> Result<(), (OnReply, Error)> {
        match self.encode(opcode, write) {
            Ok(frame) => self.enqueue(frame, on_reply, urgent),
            Err(e) => Err((on_reply, e)),
        }
    }

    /// A request's frame, its xid left 0 (set by [`enqueue`](Self::enqueue)).
    pub(crate) fn encode(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
    ) -> Result<Vec<u8>, Error> {
        let mut w = Writer::frame();
        w.int(0).int(opcode);
        write(&mut w);
        if w.len() > MAX_FRAME {
            return Err(Error::BadArguments(
                "request larger than jute.maxbuffer".into(),
            ));
        }
        Ok(w.finish())
    }

    /// Numbers `frame` (a request with its xid still 0) and puts it in the outbox, without
    /// writing it (the caller calls [`flush`](Self::flush)). Fails at once while not
    /// connected (ConnectionLoss) and once the session is over or closing.
    pub(crate) fn enqueue(
        &self,
        frame: Vec<u8>,
        on_reply: OnReply,
        urgent: bool,
    ) -> Result<(), (OnReply, Error)> {
        let state = self.state.get();
        if state.is_terminated() {
            return Err((on_reply, terminal_error(state)));
        }
        if self.closing.load(Ordering::SeqCst) {
            return Err((on_reply, Error::ClientClosed));
        }
        self.enqueue_any(frame, on_reply, urgent)
            .map_err(|on_reply| (on_reply, Error::ConnectionLoss))
    }

    /// [`enqueue`](Self::enqueue), also while closing (the CloseSession itself); gives
    /// `on_reply` back if not connected.
    fn enqueue_any(
        &self,
        mut frame: Vec<u8>,
        on_reply: OnReply,
        urgent: bool,
    ) -> Result<(), OnReply> {
        let mut outbox = self.outbox.lock();
        if !outbox.open {
            return Err(on_reply);
        }
        let xid = next_xid(&mut outbox.next_xid);
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
        let outgoing = Outgoing {
            frame,
            pending: Pending { xid, on_reply },
            urgent,
        };
        if urgent {
            outbox.queue.push_front(outgoing);
        } else {
            outbox.queue.push_back(outgoing);
        }
        Ok(())
    }

    /// Writes what the outbox holds (within [`MAX_IN_FLIGHT`]), if no other thread is writing:
    /// then that thread writes it, so no caller ever waits for another's write. Called after
    /// queuing a request. On the I/O thread it leaves the writing to the writer thread: a
    /// write blocks while the server does not read, and the server may be waiting for us to
    /// read what it answered; the I/O thread must go on reading.
    pub(crate) fn flush(&self) {
        if self.io_thread_id.get() == Some(&std::thread::current().id()) {
            self.kick_writer();
            return;
        }
        loop {
            {
                let Some(mut out) = self.out.try_lock() else {
                    return;
                };
                if !self.write_batches(&mut out) {
                    return;
                }
            }
            // Something queued while we wrote, by a caller that found `out` taken, must not
            // wait for the next caller: look again now that `out` is free.
            if !self.ready() {
                return;
            }
        }
    }

    /// Writes batches from the outbox while there are any within the bound; `false` if the
    /// connection failed (the I/O thread sees the socket close and fails the rest).
    fn write_batches(&self, out: &mut Out) -> bool {
        while let Some(batch) = self.next_batch() {
            if !self.write(out, &batch) {
                return false;
            }
        }
        true
    }

    /// Tells the writer thread to write what the outbox holds.
    fn kick_writer(&self) {
        self.writer_kick.0.lock().0 = true;
        self.writer_kick.1.notify_one();
    }

    /// Ends the writer thread and waits for it (the I/O thread does, as it ends).
    fn stop_writer(&self) {
        self.writer_kick.0.lock().1 = true;
        self.writer_kick.1.notify_one();
        let writer = self.writer.lock().take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }

    /// Takes the next requests to write from the outbox, as pending, and their frames. The
    /// I/O thread needs `pending` for every reply: it is held only to count and to append.
    fn next_batch(&self) -> Option<Vec<u8>> {
        let (taken, bytes) = {
            let mut outbox = self.outbox.lock();
            let mut room = MAX_IN_FLIGHT.saturating_sub(self.pending.lock().len());
            let (mut taken, mut bytes) = (Vec::new(), 0);
            while let Some(next) = outbox.queue.front() {
                let full = bytes + next.frame.len() > MAX_BATCH && !taken.is_empty();
                if (room == 0 && !next.urgent) || full {
                    break;
                }
                let next = outbox.queue.pop_front().expect("front checked");
                room = room.saturating_sub(1);
                bytes += next.frame.len();
                taken.push(next);
            }
            (taken, bytes)
        };
        if taken.is_empty() {
            return None;
        }
        let mut batch = Vec::with_capacity(bytes);
        let mut pending = Vec::with_capacity(taken.len());
        for outgoing in taken {
            batch.extend_from_slice(&outgoing.frame);
            pending.push(outgoing.pending);
        }
        self.pending.lock().extend(pending);
        Some(batch)
    }

    /// Whether the outbox holds a request that may go out now.
    fn ready(&self) -> bool {
        let outbox = self.outbox.lock();
        outbox
            .queue
            .front()
            .is_some_and(|next| next.urgent || self.pending.lock().len() < MAX_IN_FLIGHT)
    }

    /// Writes a frame. A failed write gives the connection up: part of the frame may have
    /// gone out, so the requests in flight, this one included, end with ConnectionLoss when
    /// the I/O thread sees the socket close.
    fn write(&self, out: &mut Out, frame: &[u8]) -> bool {
        let Some(sink) = out.sink.as_mut() else {
            return false;
        };
        if sink.send(frame).is_ok() {
            *self.last_send.lock() = Instant::now();
            return true;
        }
        if let Some(closer) = &out.closer {
            closer.close();
        }
        out.sink = None;
        false
    }

    /// Sends a request and returns the completion that `decode` fills from its reply.
    pub(crate) fn request<T: Send + 'static>(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
            + Send
            + 'static,
    ) -> Completion<T> {
        self.request_as(opcode, false, write, decode)
    }

    /// As [`request`](Self::request); an `urgent` one goes out ahead of every request not yet
    /// written (for liveness checks, whose order relative to other requests does not matter).
    pub(crate) fn request_as<T: Send + 'static>(
        &self,
        opcode: i32,
        urgent: bool,
        write: impl FnOnce(&mut Writer),
        decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
            + Send
            + 'static,
    ) -> Completion<T> {
        let (slot, completion) = completion::pair();
        let on_reply = reply_into(slot, decode);
        if let Err((on_reply, err)) = self.queue(opcode, write, on_reply, urgent) {
            let _ = on_reply(Answer::Lost(err));
        }
        completion
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
        self.close_confirmed.load(Ordering::SeqCst)
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
                if let Answer::Reply { err, shared, .. } = answer {
                    shared.close_confirmed.store(err == 0, Ordering::SeqCst);
                    shared.close_answered.store(true, Ordering::SeqCst);
                }
                Ok(())
            }),
            false,
        );
        if queued.is_ok() {
            self.flush();
        } else {
            self.finish(SessionState::Closed);
        }
        *self.closed.0.lock() = true;
        self.closed.1.notify_all();
    }

    /// Ends the session for good: fails every pending request, fires every watcher with the
    /// session's end, closes the socket.
    fn finish(&self, state: SessionState) {
        self.state.set(state);
        let err = terminal_error(self.state.get());
        for p in self.drop_connection() {
            let _ = (p.on_reply)(Answer::Lost(err.clone()));
        }
        let fired = self.watches.lock().take_all();
        watches::deliver_end(fired);
    }

    /// The connection is gone: fail what was in flight, mark the session disconnected.
    fn disconnected(&self) {
        for p in self.drop_connection() {
            let _ = (p.on_reply)(Answer::Lost(Error::ConnectionLoss));
        }
        if !self.closing.load(Ordering::SeqCst) {
            self.state.set(SessionState::Disconnected);
        }
    }

    /// Closes the socket and takes out every request in flight or queued.
    fn drop_connection(&self) -> Vec<Pending> {
        let mut out = self.out.lock();
        out.sink = None;
        out.generation += 1;
        if let Some(closer) = out.closer.take() {
            closer.close();
        }
        let mut outbox = self.outbox.lock();
        outbox.open = false;
        let mut pending: Vec<Pending> = self.pending.lock().drain(..).collect();
        pending.extend(outbox.queue.drain(..).map(|o| o.pending));
        pending
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
            self.drop_connection();
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
            self.pending.lock().push_back(Pending {
                xid: xid::SET_WATCHES,
                on_reply: Box::new(|answer| {
                    if let Answer::Reply { err, .. } = answer {
                        if err != 0 {
                            io_log!(Warn, "the server refused to set watches again: error {err}");
                        }
                    }
                    Ok(())
                }),
            });
            if !self.write(&mut out, &frame) {
                return; // The I/O thread sees the socket close and reconnects.
            }
        }
        *self.last_send.lock() = Instant::now();
        self.outbox.lock().open = true;
        // Still under `out`: a connection given up meanwhile bumped the generation first, and
        // one given up after this waits for the lock, then marks the session Disconnected.
        self.state.set(SessionState::SyncConnected);
        drop(out);
        // Requests queued since the outbox opened found `out` taken: write them.
        self.flush();
    }

    /// Sends a ping, unless a caller is writing right now (then there is traffic anyway, and
    /// the I/O thread must not wait for a write the server may not be reading). It goes
    /// ahead of what waits in the outbox. `false` if the connection is gone.
    fn send_ping(&self) -> bool {
        let Some(mut out) = self.out.try_lock() else {
            return true;
        };
        if out.sink.is_none() {
            // Not installed yet (the re-arm thread is on its way), or given up, which the
            // reader learns from the socket itself.
            return true;
        }
        let mut w = Writer::frame();
        w.int(xid::PING).int(op::PING);
        let sent = self.write(&mut out, &w.finish());
        drop(out);
        // A request queued meanwhile found `out` taken, and left its writing to us.
        if self.ready() {
            self.kick_writer();
        }
        sent
    }

    fn last_send(&self) -> Instant {
        *self.last_send.lock()
    }
}

impl Unwatch for Shared {
    /// Removes the server's watch when its last watcher goes (its reply is not awaited;
    /// `NoWatcher`, fired meanwhile, is as good as done).
    fn unwatch(&self, key: &(String, Kind), id: u64) {
        {
            let mut watches = self.watches.lock();
            let Some(removal) = watches.unregister(key, id) else {
                return;
            };
            // Queued under the registry's lock, as a request setting the watch again is (see
            // `Client::watching`): that one is queued either before (then the registry keeps
            // the removal back) or after this one, never between the decision and the
            // removal. Between, the removal would take the new watch off the server, and its
            // watcher would wait forever: a waiter dropping its old watch on the runtime
            // thread while it watches the same node anew after a reconnect did that.
            let queued = self.queue_only(
                op::REMOVE_WATCHES,
                |w| {
                    w.string(&removal.path).int(removal.kind.remove_type());
                },
                Box::new(|_| Ok(())),
                false,
            );
            drop(queued); // Not connected: the watch is not set again on the next connection.
        }
        self.flush();
    }
}

fn next_xid(next: &mut i32) -> i32 {
    let xid = *next;
    *next = if xid >= i32::MAX - 1 { 1 } else { xid + 1 };
    xid
}

pub(crate) fn terminal_error(state: SessionState) -> Error {
    match state {
        SessionState::AuthFailed => Error::AuthFailed,
        SessionState::Closed => Error::ClientClosed,
        _ => Error::SessionExpired,
    }
}

/// An `OnReply` that decodes with `decode` into `slot`.
fn reply_into<T: Send + 'static>(
    slot: Slot<T>,
    decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
        + Send
        + 'static,
) -> OnReply {
    Box::new(move |answer| match answer {
        Answer::Lost(err) => {
            slot.fill(Err(err));
            Ok(())
        }
        Answer::Reply { err, body, shared } => match decode(err, body, shared) {
            Ok(value) => {
                slot.fill(value);
                Ok(())
            }
            Err(malformed) => {
                slot.fill(Err(Error::ConnectionLoss));
                Err(malformed)
            }
        },
    })
}

/// Splits the watch paths into SetWatches requests of at most [`SET_WATCHES_MAX_BYTES`] of
/// paths each.
fn chunk_watches(data: Vec<String>, child: Vec<String>) -> Vec<(Vec<String>, Vec<String>)> {
    let mut chunks = Vec::new();
    let (mut d, mut c, mut bytes) = (Vec::new(), Vec::new(), 0);
    let all = data
        .into_iter()
        .map(|p| (Kind::Data, p))
        .chain(child.into_iter().map(|p| (Kind::Child, p)));
    for (kind, path) in all {
        let size = path.len() + 4;
        if bytes + size > SET_WATCHES_MAX_BYTES && bytes > 0 {
            chunks.push((std::mem::take(&mut d), std::mem::take(&mut c)));
            bytes = 0;
        }
        bytes += size;
        match kind {
            Kind::Data => d.push(path),
            Kind::Child => c.push(path),
        }
    }
    if bytes > 0 {
        chunks.push((d, c));
    }
    chunks
}

/// A connection with an established session.
pub(crate) struct Established {
    pub(crate) link: Link,
    pub(crate) frames: Frames,
    pub(crate) response: ConnectResponse,
    /// When the connect request was sent: the session was alive then.
    pub(crate) sent: Instant,
    /// The server, for messages: the host as in the connect string, with the address dialled
    /// when that differs.
    pub(crate) server: String,
}

/// Connects to one host and establishes (or re-establishes) the session, authenticating it,
/// all before `deadline`.
pub(crate) fn attempt(
    config: &Config,
    rotation: &Rotation,
    host: &Host,
    session: (i64, &[u8]),
    last_zxid: i64,
    deadline: Instant,
) -> Result<Established, AttemptError> {
    let addrs = rotation.resolve(host)?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(AttemptError::Io(io::ErrorKind::TimedOut.into()));
        }
        let stream = match link::tcp(addr, left) {
            Ok(s) => s,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let link = open_link(config, host, stream, deadline)?;
        let mut established = handshake(config, link, session, last_zxid, deadline)?;
        let dialled = addr.to_string();
        established.server = if host.entry.ends_with(&dialled) {
            host.entry.clone()
        } else {
            format!("{} ({dialled})", host.entry)
        };
        return Ok(established);
    }
    Err(AttemptError::Io(last))
}

fn open_link(
    config: &Config,
    host: &Host,
    stream: std::net::TcpStream,
    deadline: Instant,
) -> Result<Link, AttemptError> {
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        return super::tls::connect(tls, &host.name, stream, deadline).map_err(AttemptError::Tls);
    }
    #[cfg(not(feature = "tls"))]
    let _ = deadline;
    if host.tls {
        return Err(AttemptError::Tls(
            "tcp+tls:// needs the `tls` feature and ClientBuilder::tls".into(),
        ));
    }
    let _ = config;
    Ok(link::plain(stream)?)
}

fn handshake(
    config: &Config,
    mut link: Link,
    (session_id, password): (i64, &[u8]),
    last_zxid: i64,
    deadline: Instant,
) -> Result<Established, AttemptError> {
    let sent = Instant::now();
    let request = ConnectRequest {
        last_zxid,
        timeout_ms: config.session_timeout.as_millis().min(i32::MAX as u128) as i32,
        session_id,
        password,
    };
    link.sink.send(&request.frame())?;
    let mut frames = Frames::new(MAX_FRAME);
    let frame = read_frame(&mut link, &mut frames, deadline)?;
    let response = ConnectResponse::read(&mut Reader::new(&frame))?;
    // A server says that a session has expired with a timeout of 0. A negative one is no
    // server's answer but a broken peer's: a failed attempt, like any garbage, not the end of
    // a session that the next server would take back.
    if response.timeout_ms < 0 {
        let why = format!("negative session timeout {}", response.timeout_ms);
        return Err(Malformed(why).into());
    }
    if response.timeout_ms == 0 {
        return Err(AttemptError::Expired);
    }
    if session_id != 0 && response.session_id != session_id {
        // Taking our session back gives our session or says it expired; anything else is
        // a broken peer, and using its session would mix two sessions' nodes and watches.
        let why = format!(
            "asked for session {session_id:#x}, got {:#x}",
            response.session_id
        );
        return Err(Malformed(why).into());
    }
    // Auth packets go first on every connection, and their replies are awaited: a refused
    // credential is then known before the session is used.
    for (scheme, credential) in &config.auth {
        let mut w = Writer::frame();
        w.int(xid::AUTH)
            .int(op::AUTH)
            .int(0)
            .string(scheme)
            .buffer(credential);
        link.sink.send(&w.finish())?;
    }
    let mut answered = 0;
    while answered < config.auth.len() {
        let frame = read_frame(&mut link, &mut frames, deadline)?;
        let header = ReplyHeader::read(&mut Reader::new(&frame))?;
        match header.xid {
            xid::AUTH if header.err == 0 => answered += 1,
            xid::AUTH => return Err(AttemptError::AuthFailed),
            xid::NOTIFICATION => {}
            other => {
                return Err(AttemptError::Io(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected xid {other} before authentication"),
                )))
            }
        }
    }
    #[cfg(feature = "sasl")]
    if let Some((user, password)) = &config.sasl {
        super::sasl::authenticate(
            &mut link,
            &mut frames,
            user,
            password,
            &_host_name(config),
            deadline,
        )?;
    }
    Ok(Established {
        link,
        frames,
        response,
        sent,
        server: String::new(),
    })
}

#[cfg(feature = "sasl")]
fn _host_name(config: &Config) -> String {
    config
        .hosts
        .first()
        .map(|h| h.name.clone())
        .unwrap_or_default()
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

/// The writer thread: writes what waits in the outbox once replies make room for it (the I/O
/// thread, which reads them, must not write; callers write only as they queue), until the
/// I/O thread stops it.
fn write_queued(shared: Arc<Shared>) {
    loop {
        {
            let mut kick = shared.writer_kick.0.lock();
            while !kick.0 && !kick.1 {
                // Woken by a kick. The timeout is a safety net: were a kick ever missed, the
                // requests left in the outbox would go out a moment later, not never.
                if shared
                    .writer_kick
                    .1
                    .wait_for(&mut kick, WRITER_NET)
                    .timed_out()
                    && shared.ready()
                {
                    break;
                }
            }
            if kick.1 {
                return;
            }
            kick.0 = false;
        }
        loop {
            let written = shared.write_batches(&mut shared.out.lock());
            // Looked at with `out` free: a caller that found it taken left its request to us.
            if !written || !shared.ready() {
                break;
            }
        }
    }
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
    let shared = Arc::new(Shared {
        out: Mutex::new(Out {
            sink: None,
            closer: None,
            generation: 0,
        }),
        outbox: Mutex::new(Outbox {
            open: false,
            next_xid: 1,
            queue: VecDeque::new(),
        }),
        pending: Mutex::new(VecDeque::new()),
        last_send: Mutex::new(Instant::now()),
        watches: Mutex::new(Watches::default()),
        state: StateCell::new(SessionState::Disconnected),
        session_id: response.session_id,
        password: response.password.clone(),
        timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
        last_zxid: AtomicI64::new(0),
        closing: AtomicBool::new(false),
        server: Mutex::new(server),
        close_confirmed: AtomicBool::new(false),
        close_answered: AtomicBool::new(false),
        closed: (Mutex::new(false), Condvar::new()),
        on_proof: Mutex::new(None),
        io_thread: Mutex::new(None),
        io_thread_id: std::sync::OnceLock::new(),
        writer_kick: (Mutex::new((false, false)), Condvar::new()),
        writer: Mutex::new(None),
        config,
    });
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
        .spawn(move || write_queued(writer_shared));
    let writer = match writer {
        Ok(writer) => writer,
        Err(e) => {
            io_log!(Error, "cannot start the session's writer thread: {e}");
            shared.finish(SessionState::Closed);
            return shared;
        }
    };
    *shared.writer.lock() = Some(writer);
    let thread_shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("zklock-io".into())
        .spawn(move || {
            let _ = thread_shared.io_thread_id.set(std::thread::current().id());
            run(
                thread_shared.clone(),
                rotation,
                source,
                frames,
                reader_closer,
            );
            thread_shared.stop_writer();
        });
    match spawned {
        Ok(thread) => *shared.io_thread.lock() = Some(thread),
        Err(e) => {
            io_log!(Error, "cannot start the session's I/O thread: {e}");
            shared.finish(SessionState::Closed);
            shared.stop_writer();
        }
    }
    shared
}

/// The I/O thread: serves each connection until it fails, then reconnects, until the session
/// ends.
fn run(
    shared: Arc<Shared>,
    mut rotation: Rotation,
    mut source: Box<dyn link::Source>,
    mut frames: Frames,
    mut closer: Closer,
) {
    let id = shared.session_id;
    let mut last_recv = Instant::now();
    let mut connected_at = Instant::now();
    // Grows while connections die as soon as they are made (a server that answers the
    // handshake, then garbage): without it the client would reconnect thousands of times a
    // second.
    let mut storm_pause = Duration::ZERO;
    loop {
        let why = serve(&shared, source.as_mut(), &mut frames, &mut last_recv);
        closer.close();
        if shared.state.get().is_terminated() {
            shared.finish(shared.state.get());
            return;
        }
        if shared.closing.load(Ordering::SeqCst) {
            shared.finish(SessionState::Closed);
            return;
        }
        io_log!(
            Info,
            "session {id:#x}: connection lost ({why}); reconnecting"
        );
        shared.disconnected();
        storm_pause = if connected_at.elapsed() < STORM_LIFETIME {
            (storm_pause * 2).clamp(Duration::from_millis(50), Duration::from_secs(1))
        } else {
            Duration::ZERO
        };
        if !storm_pause.is_zero() {
            let mut closed = shared.closed.0.lock();
            if !*closed {
                shared.closed.1.wait_for(&mut closed, storm_pause);
            }
        }
        match reconnect(&shared, &mut rotation, last_recv) {
            Ok(established) => {
                last_recv = Instant::now();
                connected_at = Instant::now();
                io_log!(
                    Info,
                    "session {id:#x}: reconnected to {}",
                    established.link.closer.peer()
                );
                let Established {
                    link,
                    frames: f,
                    sent,
                    response,
                    server,
                } = established;
                *shared.server.lock() = server;
                let granted = Duration::from_millis(response.timeout_ms as u64);
                shared
                    .timeout_ms
                    .store(granted.as_millis() as u64, Ordering::SeqCst);
                let hook = shared.on_proof.lock().clone();
                if let Some(hook) = hook {
                    hook(sent, granted);
                }
                closer = Closer::clone_of(&link.closer);
                source = link.source;
                frames = f;
                shared.connected(link.sink, link.closer);
            }
            Err(state) => {
                io_log!(Warn, "session {id:#x} ended: {state:?}");
                shared.finish(state);
                return;
            }
        }
    }
}

/// Reads one connection until it fails; returns why.
fn serve(
    shared: &Arc<Shared>,
    source: &mut dyn link::Source,
    frames: &mut Frames,
    last_recv: &mut Instant,
) -> String {
    let timeout = shared.timeout();
    // Silence for 2/5 of the session timeout means the connection is dead (a frozen server
    // or a blackhole): a ping goes out after 1/5 without a word, so a live server has had
    // time to answer it.
    let dead_after = timeout * 2 / 5;
    let probe_after = timeout / 5;
    let ping_every = timeout / 3;
    let tick = (timeout / 15).clamp(Duration::from_millis(10), Duration::from_millis(200));
    if let Err(e) = source.set_timeout(tick) {
        return e.to_string();
    }
    let mut ping_out = false;
    let mut close_by: Option<Instant> = None;
    loop {
        match frames.next(source) {
            Ok(Read1::Frame(frame)) => {
                *last_recv = Instant::now();
                match handle(shared, &frame, &mut ping_out) {
                    Ok(Handled::Going) => {}
                    Ok(Handled::Closed) => {
                        shared.state.set(SessionState::Closed);
                        return "closed".into();
                    }
                    Ok(Handled::AuthFailed) => {
                        shared.state.set(SessionState::AuthFailed);
                        return "authentication failed".into();
                    }
                    Ok(Handled::Expired) => {
                        shared.state.set(SessionState::Expired);
                        return "the server says the session expired".into();
                    }
                    Err(malformed) => {
                        io_log!(
                            Warn,
                            "session {:#x}: {malformed}; resetting the connection",
                            shared.session_id
                        );
                        return malformed.to_string();
                    }
                }
            }
            Ok(Read1::Idle) => {}
            Err(e) => return e.to_string(),
        }
        let now = Instant::now();
        if shared.closing.load(Ordering::SeqCst) {
            let by = *close_by.get_or_insert(now + CLOSE_WAIT.min(timeout));
            if now >= by {
                shared.state.set(SessionState::Closed);
                return "closed (no reply to CloseSession)".into();
            }
        }
        let silent = now.saturating_duration_since(*last_recv);
        if silent >= dead_after {
            return format!("no word from the server for {silent:?}");
        }
        let quiet = now.saturating_duration_since(shared.last_send());
        if quiet >= ping_every || (silent >= probe_after && !ping_out) {
            if !shared.send_ping() {
                return "cannot send a ping".into();
            }
            ping_out = true;
        }
    }
}

enum Handled {
    Going,
    Closed,
    AuthFailed,
    Expired,
}

fn handle(shared: &Arc<Shared>, frame: &[u8], ping_out: &mut bool) -> Result<Handled, Malformed> {
    let mut r = Reader::new(frame);
    let header = ReplyHeader::read(&mut r)?;
    match header.xid {
        xid::NOTIFICATION => {
            let note = Notification::read(&mut r)?;
            let Some(event_type) = note.event_type() else {
                return Ok(Handled::Going); // A state event or a type we never watch for.
            };
            let fired = shared.watches.lock().fire(&note.path, event_type);
            watches::deliver(fired, &note.path);
            Ok(Handled::Going)
        }
        xid::PING => {
            *ping_out = false;
            Ok(Handled::Going)
        }
        xid::AUTH => {
            if header.err != 0 {
                return Ok(Handled::AuthFailed);
            }
            Ok(Handled::Going)
        }
        xid => {
            // Only replies to requests move the zxid we have seen (as ZooKeeper's own client
            // does): a ping's is the server's own, and a lagging server we move to next must
            // not refuse us for a zxid we never read.
            if header.zxid > 0 {
                shared.last_zxid.fetch_max(header.zxid, Ordering::SeqCst);
            }
            let pending = {
                let mut pending = shared.pending.lock();
                match pending.front() {
                    Some(p) if p.xid == xid => pending.pop_front(),
                    Some(p) => {
                        return Err(Malformed(format!("reply xid {xid}, expected {}", p.xid)))
                    }
                    None => return Err(Malformed(format!("reply xid {xid} with none pending"))),
                }
            };
            let pending = pending.expect("front checked");
            if header.err == -115 || header.err == -124 {
                // Refused credentials end the session: the server closes the connection.
                let _ = (pending.on_reply)(Answer::Lost(Error::AuthFailed));
                return Ok(Handled::AuthFailed);
            }
            if header.err == -112 {
                // Our session expired under us (the server answers this before closing).
                let _ = (pending.on_reply)(Answer::Lost(Error::SessionExpired));
                return Ok(Handled::Expired);
            }
            (pending.on_reply)(Answer::Reply {
                err: header.err,
                body: r,
                shared,
            })?;
            // A reply makes room on the wire for what waits in the outbox.
            if shared.ready() {
                shared.kick_writer();
            }
            // The session ends with the answer to our CloseSession, the last request: not at
            // an empty queue, which a reply can leave before the CloseSession is even queued.
            if shared.close_answered.load(Ordering::SeqCst) {
                return Ok(Handled::Closed);
            }
            Ok(Handled::Going)
        }
    }
}

/// Reconnects the session: passes over the hosts with a growing pause between them, until a
/// server takes the session back, says it has expired, or the session has been silent so long
/// that the server must have expired it.
fn reconnect(
    shared: &Arc<Shared>,
    rotation: &mut Rotation,
    last_recv: Instant,
) -> Result<Established, SessionState> {
    let timeout = shared.timeout();
    // The server expires the session one timeout after it last heard from us; past 7/5 of
    // it, no server will take it back. Giving it up here is the client's decision only: a
    // leader elected meanwhile gives every session a fresh timeout, so the abandoned session
    // (and its lock nodes) can outlive this point by up to one more timeout (seen by the
    // nemesis, seed 5). Nothing here relies on the session being gone: holders were told
    // `Lost`, and a fenced write goes through the new session's check of the lock node.
    let hopeless = last_recv + timeout * 7 / 5;
    let mut pause = Duration::from_millis(50);
    loop {
        for _ in 0..rotation.len() {
            if shared.closing.load(Ordering::SeqCst) {
                return Err(SessionState::Closed);
            }
            let now = Instant::now();
            if now >= hopeless {
                return Err(SessionState::Expired);
            }
            let host = rotation.next();
            // A handshake takes a round trip; one that hangs (a blackholed path) must leave
            // time for more attempts before the session is given up.
            let per_host =
                (timeout * 2 / 5 / rotation.len() as u32).max(Duration::from_millis(250));
            let deadline = (now + per_host).min(hopeless);
            let session = (shared.session_id, shared.password.as_slice());
            match attempt(
                &shared.config,
                rotation,
                &host,
                session,
                shared.last_zxid(),
                deadline,
            ) {
                Ok(established) => return Ok(established),
                Err(AttemptError::Expired) => return Err(SessionState::Expired),
                Err(AttemptError::AuthFailed) => return Err(SessionState::AuthFailed),
                Err(e) => io_log!(
                    Debug,
                    "session {:#x}: {} gave no session: {e:?}",
                    shared.session_id,
                    host.entry
                ),
            }
        }
        // Every host tried: pause, unless the session is being closed.
        let mut closed = shared.closed.0.lock();
        if !*closed {
            shared.closed.1.wait_for(&mut closed, pause);
        }
        pause = (pause * 2).min(Duration::from_secs(1));
    }
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

    #[test]
    fn xids_stay_positive_when_they_wrap() {
        let mut next = i32::MAX - 1;
        assert_eq!(next_xid(&mut next), i32::MAX - 1);
        assert_eq!(next_xid(&mut next), 1);
    }
}
