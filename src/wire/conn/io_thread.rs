//! The I/O thread: reads a connection's replies and notifications and sends its pings; when
//! the connection fails, reconnects, until the session ends.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::handshake::{attempt, Established};
use super::outbox::Due;
use super::settle;
use super::{Answer, Shared, CLOSE_WAIT};
use crate::rt::relay::io_log;
use crate::wire::attempt::AttemptError;
use crate::wire::completion::WakeLater;
use crate::wire::error::Error;
use crate::wire::events::{self, KeeperState};
use crate::wire::hosts::Rotation;
use crate::wire::jute::{Malformed, Reader};
use crate::wire::link::{self, Closer, Frames, Read1};
use crate::wire::proto::{xid, Notification, ReplyHeader};

/// A connection that dies sooner than this after its handshake counts toward a reconnect storm.
const STORM_LIFETIME: Duration = Duration::from_secs(1);

/// How many bytes of a frame still on its way count as word from the server. A reply of
/// megabytes may take longer than the silence limit to arrive, and must not pass for a dead
/// connection; a server that trickles a few bytes at a time, or that announced a frame it never
/// sends while pings come in behind it, must not pass for a live one.
const PROGRESS: u64 = 64 * 1024;

impl Shared {
    /// The I/O thread: serves each connection until it fails, then reconnects, until the
    /// session ends.
    pub(super) fn serve_session(
        self: Arc<Self>,
        mut rotation: Rotation,
        mut source: Box<dyn link::Source>,
        mut frames: Frames,
        mut closer: Closer,
    ) {
        let shared = self;
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
                shared.finish(KeeperState::Closed);
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
    // Bytes read when the server was last heard from.
    let mut heard_at = frames.received();
    // Held while replies are at hand (see `WakeLater`); after them, what they made room for
    // on the wire goes out.
    let mut wake_later: Option<WakeLater> = None;
    loop {
        if wake_later.is_some() && !frames.has_frame() {
            drop(wake_later.take());
            if shared.ready() {
                shared.kick_writer();
            }
        }
        let read = frames.next(source);
        if frames.received() - heard_at >= PROGRESS {
            heard_at = frames.received();
            *last_recv = Instant::now();
        }
        match read {
            Ok(Read1::Oversized { head, len }) => {
                wake_later.get_or_insert_with(WakeLater::new);
                heard_at = frames.received();
                *last_recv = Instant::now();
                if let Err(malformed) = too_large(shared, &head, len, frames.max()) {
                    io_log!(
                        Warn,
                        "session {:#x}: {malformed}; resetting the connection",
                        shared.session_id
                    );
                    return malformed.to_string();
                }
            }
            Ok(Read1::Frame(frame)) => {
                wake_later.get_or_insert_with(WakeLater::new);
                heard_at = frames.received();
                *last_recv = Instant::now();
                match handle(shared, &frame, &mut ping_out) {
                    // Silence counts from when this thread listens again: time spent handling
                    // a frame (or descheduled meanwhile) is the client's, not the server's;
                    // counted, a busy client process could take a live server for a dead one.
                    Ok(Handled::Going) => *last_recv = Instant::now(),
                    Ok(Handled::Closed) => {
                        shared.state.set(KeeperState::Closed);
                        return "closed".into();
                    }
                    Ok(Handled::AuthFailed) => {
                        shared.state.set(KeeperState::AuthFailed);
                        return "authentication failed".into();
                    }
                    Ok(Handled::Expired) => {
                        shared.state.set(KeeperState::Expired);
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
                shared.state.set(KeeperState::Closed);
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
            events::deliver(fired, &note.path);
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
            // Refused credentials end the session (the server closes the connection), and so
            // does our session's expiry under us (the server answers this before closing).
            let ends = match header.err {
                -115 | -124 => Some((Error::AuthFailed, Handled::AuthFailed)),
                -112 => Some((Error::SessionExpired, Handled::Expired)),
                _ => None,
            };
            let answered = shared.outbox.lock().answer(xid, ends.is_none());
            let due = match answered {
                Ok(due) => due,
                Err(malformed) => {
                    // A server before 3.6 answers a `multiRead` Unimplemented at once, ahead of
                    // the requests before it, and closes the connection: on the next one the
                    // session sends its reads one by one.
                    if header.err == -6 {
                        shared.refuse_multi_read(header.err);
                    }
                    return Err(malformed);
                }
            };
            if let Some((err, handled)) = ends {
                let _ = complete(shared, due, Answer::Lost(err));
                return Ok(handled);
            }
            complete(
                shared,
                due,
                Answer::Reply {
                    err: header.err,
                    zxid: header.zxid,
                    body: r,
                    learned: &shared.learned,
                },
            )?;
            // The session ends with the answer to our CloseSession, the last request: not at
            // an empty queue, which a reply can leave before the CloseSession is even queued.
            if shared.learned.close_answered.load(Ordering::SeqCst) {
                return Ok(Handled::Closed);
            }
            Ok(Handled::Going)
        }
    }
}

/// Gives an `answer` to whom the outbox says it is `due`, with the outbox's lock let go.
pub(super) fn complete(
    shared: &Arc<Shared>,
    due: Due,
    answer: Answer<'_>,
) -> Result<(), Malformed> {
    match due {
        Due::One(on_reply) => on_reply(answer),
        Due::Multi { seq, members } => settle::multi(shared, seq, members, answer),
        Due::MultiRead { seq, members } => settle::multi_read(shared, seq, members, answer),
        Due::Again(None) => Ok(()),
        Due::Again(Some(refused)) => refused(Answer::Lost(Error::ConnectionLoss)),
    }
}

/// A reply of `len` bytes, over the client's `limit`, whose first bytes are `head`: its request
/// fails with [`Error::ReplyTooLarge`], and the connection, which every other request shares,
/// lives on (the reader skips the rest of the frame). Only a reply to a request of ours may be
/// that large: anything else over the limit is a broken peer, and resets the connection.
fn too_large(shared: &Arc<Shared>, head: &[u8], len: usize, limit: usize) -> Result<(), Malformed> {
    let header = ReplyHeader::read(&mut Reader::new(head))?;
    if header.xid < 0 {
        return Err(Malformed(format!(
            "a frame of {len} bytes (over the limit of {limit}) for xid {}",
            header.xid
        )));
    }
    let due = shared.outbox.lock().answer(header.xid, false)?;
    if header.zxid > 0 {
        shared.last_zxid.fetch_max(header.zxid, Ordering::SeqCst);
    }
    io_log!(
        Warn,
        "session {:#x}: a reply of {len} bytes is over the client's limit of {limit}; \
         failing its request, skipping the reply",
        shared.session_id
    );
    complete(
        shared,
        due,
        Answer::Lost(Error::ReplyTooLarge { size: len, limit }),
    )
}

/// Reconnects the session: passes over the hosts with a growing pause between them, until a
/// server takes the session back, says it has expired, or the session has been silent so long
/// that the server must have expired it.
fn reconnect(
    shared: &Arc<Shared>,
    rotation: &mut Rotation,
    last_recv: Instant,
) -> Result<Established, KeeperState> {
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
                return Err(KeeperState::Closed);
            }
            let now = Instant::now();
            if now >= hopeless {
                return Err(KeeperState::Expired);
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
                Err(AttemptError::Expired) => return Err(KeeperState::Expired),
                Err(AttemptError::AuthFailed) => return Err(KeeperState::AuthFailed),
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
