//! A hostile or broken server never panics the client, never makes it allocate without bound,
//! and never keeps a call past its deadline.
//!
//! The server here is a fake, on 127.0.0.1: it tests zklock's decoding, not ZooKeeper. It
//! speaks enough of the protocol to grant a session (ConnectRequest and ConnectResponse, reply
//! headers, pings; every other request is answered NoNode), then misbehaves as each test says.
//! zklock is driven through its public API only.
//!
//! A panic on zklock's I/O thread would show as a dead client, so each garbage test checks,
//! round after round, that the client closes the connection that carried the garbage (a
//! logged reset), is not `Connected` while the server refuses it, and comes back on a new
//! connection with the same session; and, at the end, that the session is `Connected` again
//! once the server behaves. A bad handshake must end in a failed attempt and the next attempt.
//!
//! Needs no ZooKeeper.

mod common;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::SessionState;
use zklock::DistributedMutex;

/// The session timeout the client asks for; the fake server grants what it is asked.
const SESSION: Duration = Duration::from_secs(4);
/// How long each lock attempt waits.
const LOCK_WAIT: Duration = Duration::from_millis(400);
/// What a timed lock call may take beyond its timeout: deleting the node it queued waits up to
/// one second.
const LOCK_SLACK: Duration = Duration::from_secs(2);
/// How much the process may grow during a garbage test: far less than the 2 GiB frame the
/// server announces, and than the 32 MiB of it that it sends; more than the few small frames
/// these tests make the client hold (and than what the other tests running meanwhile take).
const MEMORY_BOUND: usize = 64 << 20;
/// Garbage rounds per test: each one must be followed by a new connection.
const ROUNDS: usize = 2;
/// The largest reply a client reads by default (`ClientBuilder::max_reply_size`). A larger
/// one in reply to a request fails that request alone (tests/scale.rs, `long_queues`); one that answers
/// no request is garbage.
const MAX_FRAME: usize = 16 << 20;

const PING: i32 = 11;
const SET_WATCHES: i32 = 101;
const CLOSE_SESSION: i32 = -11;
const NO_NODE: i32 = -101;

/// What the server sends instead of a good reply, once it granted the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Garbage {
    /// The request's xid and an OK header, then 3 bytes of body: too short for any reply that
    /// has one.
    ShortBody,
    /// A stat where the reply starts with a string or a list (a length of 2 GiB - 1).
    WrongType,
    /// A well-formed reply to a request that was never sent.
    UnknownXid,
    /// A frame announced at 2 GiB - 1 bytes, followed by as much of it as the client takes
    /// (32 MiB): its request fails as too large, the client skips what comes of it, and the
    /// rest never comes, so the connection falls silent.
    HugeLength,
    /// A frame one byte over the largest the client reads, answering no request, sent whole.
    OverMaxBuffer,
    /// Half a reply, then the server closes the connection.
    ClosedMidFrame,
    /// A reply one byte at a time, far slower than the session's silence limit.
    Trickle,
    /// A watch notification whose path is longer than its frame, right after the handshake.
    BadNotification,
    /// Random bytes right after the ConnectResponse.
    AfterHandshake,
}

impl Garbage {
    /// Sent as soon as a session is granted, rather than in reply to a request.
    fn unprompted(self) -> bool {
        matches!(self, Garbage::BadNotification | Garbage::AfterHandshake)
    }

    /// The client, not the server, must end the connection that carried it.
    fn client_closes(self) -> bool {
        self != Garbage::ClosedMidFrame
    }
}

/// A ConnectResponse that grants nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadHandshake {
    /// Ends in the middle of the session id.
    TooShort,
    /// A password length of 2 GiB - 1.
    HugePassword,
    /// A password of 1000 bytes, sent whole (real ones have 16).
    LongPassword,
    /// A negative session timeout: bogus, not the server's "expired" (which is 0).
    NegativeTimeout,
    /// Half the response, then the server closes the connection.
    ClosedMidFrame,
    /// A frame announced at 2 GiB - 1 bytes.
    HugeLength,
    /// A response of 1000 bytes trickled one byte every 50 ms.
    Trickle,
}

/// What the fake server does and what it saw.
#[derive(Default)]
struct State {
    garbage: Option<Garbage>,
    /// After sending garbage, refuse every connection (accept and close it at once) until
    /// the test brings the server back up.
    down_after_garbage: bool,
    down: bool,
    /// The next this many handshakes are answered with `bad_handshake`.
    bad_handshakes: usize,
    bad_handshake: Option<BadHandshake>,
    /// The session id of every ConnectRequest, in order.
    connect_requests: Vec<i64>,
    granted: usize,
    /// Connections that carried garbage, and how many of those the client closed.
    garbage_sent: usize,
    closed_by_client: usize,
    refused: usize,
    /// Connections that were granted a session, to cut them.
    live: Vec<TcpStream>,
    /// Grant this session timeout (ms) instead of the one asked for, as a server whose
    /// `maxSessionTimeout` was lowered does.
    grant_ms: Option<i32>,
}

struct FakeZk {
    addr: String,
    session_id: i64,
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl FakeZk {
    fn start() -> FakeZk {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // One id per server, so that each test finds its own session in the log.
        let session_id = 0x5eed_0000_0000 | i64::from(port);
        let shared: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let server = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let shared = server.clone();
                thread::spawn(move || {
                    let _ = connection(stream, &shared, session_id);
                });
            }
        });
        FakeZk {
            addr: format!("127.0.0.1:{port}"),
            session_id,
            shared,
        }
    }

    fn set(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.shared.0.lock().unwrap());
        self.shared.1.notify_all();
    }

    fn get<T>(&self, look: impl FnOnce(&State) -> T) -> T {
        look(&self.shared.0.lock().unwrap())
    }

    /// Waits up to `limit` for `cond`; true once it holds.
    fn wait(&self, limit: Duration, cond: impl Fn(&State) -> bool) -> bool {
        let (lock, changed) = &*self.shared;
        let deadline = Instant::now() + limit;
        let mut state = lock.lock().unwrap();
        while !cond(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = changed.wait_timeout(state, left).unwrap().0;
        }
        true
    }

    /// Cuts every connection that has a session: the client must reconnect.
    fn cut(&self) {
        self.set(|s| {
            for stream in s.live.drain(..) {
                let _ = stream.shutdown(Shutdown::Both);
            }
        });
    }
}

fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(0..=MAX_FRAME as i32).contains(&len) {
        return Err(io::ErrorKind::InvalidData.into());
    }
    let mut body = vec![0; len as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

fn int(body: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(body[at..at + 4].try_into().unwrap())
}

/// A reply header.
fn header(xid: i32, err: i32) -> Vec<u8> {
    let mut h = xid.to_be_bytes().to_vec();
    h.extend(7_i64.to_be_bytes()); // zxid
    h.extend(err.to_be_bytes());
    h
}

/// A ConnectResponse body: protocol version, timeout, session id, password, read-only flag.
fn connect_response(timeout: i32, session_id: i64, password: &[u8], password_len: i32) -> Vec<u8> {
    let mut r = 0_i32.to_be_bytes().to_vec();
    r.extend(timeout.to_be_bytes());
    r.extend(session_id.to_be_bytes());
    r.extend(password_len.to_be_bytes());
    r.extend_from_slice(password);
    r.push(0);
    r
}

/// Writes `bytes` one at a time, `every` apart, until done or the client goes away.
fn trickle(stream: &mut TcpStream, bytes: &[u8], every: Duration) -> io::Result<()> {
    for b in bytes {
        stream.write_all(&[*b])?;
        thread::sleep(every);
    }
    Ok(())
}

/// Writes `len` bytes of zeros in 64 KiB pieces, until done or the client goes away.
fn stream_zeros(stream: &mut TcpStream, len: usize) -> io::Result<()> {
    let piece = vec![0; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = left.min(piece.len());
        stream.write_all(&piece[..n])?;
        left -= n;
    }
    Ok(())
}

/// Serves one connection: the handshake, then requests, as `shared` says.
fn connection(
    mut stream: TcpStream,
    shared: &(Mutex<State>, Condvar),
    session_id: i64,
) -> io::Result<()> {
    // The server's threads end even if a test leaves a client hanging.
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    let update = |change: &dyn Fn(&mut State)| {
        change(&mut shared.0.lock().unwrap());
        shared.1.notify_all();
    };
    if shared.0.lock().unwrap().down {
        update(&|s| s.refused += 1);
        return Ok(());
    }
    // protocolVersion int, lastZxidSeen long, timeOut int, sessionId long, passwd, readOnly.
    let request = read_frame(&mut stream)?; // a probe sends nothing: it ends here
    let timeout = int(&request, 12);
    let asked = i64::from_be_bytes(request[16..24].try_into().unwrap());
    let bad = {
        let mut s = shared.0.lock().unwrap();
        s.connect_requests.push(asked);
        shared.1.notify_all();
        if s.bad_handshakes > 0 {
            s.bad_handshakes -= 1;
            s.bad_handshake
        } else {
            None
        }
    };
    if let Some(bad) = bad {
        return bad_handshake(stream, bad, timeout);
    }
    let granted_ms = shared.0.lock().unwrap().grant_ms.unwrap_or(timeout);
    let mut response = framed(&connect_response(granted_ms, session_id, &[7; 16], 16));
    let garbage = {
        let mut s = shared.0.lock().unwrap();
        s.granted += 1;
        s.live.push(stream.try_clone()?);
        shared.1.notify_all();
        s.garbage
    };
    let mut sent_garbage = false;
    let mut send_garbage = |stream: &mut TcpStream, xid: i32, garbage: Garbage| {
        update(&|s| {
            s.garbage_sent += 1;
            if s.down_after_garbage {
                s.down = true;
            }
        });
        sent_garbage = true;
        misbehave(stream, xid, garbage)
    };
    let outcome: io::Result<()> = (|| {
        match garbage {
            Some(g @ Garbage::AfterHandshake) => {
                // In the same write as the response: the client reads both at once.
                response.extend((0..200u32).map(|i| (i * 37 % 251) as u8));
                stream.write_all(&response)?;
                send_garbage(&mut stream, 0, g)?;
            }
            Some(g @ Garbage::BadNotification) => {
                stream.write_all(&response)?;
                send_garbage(&mut stream, -1, g)?;
            }
            _ => stream.write_all(&response)?,
        }
        loop {
            let request = read_frame(&mut stream)?;
            let (xid, op) = (int(&request, 0), int(&request, 4));
            // Read again for each request: a test may have made the server behave.
            let now = shared.0.lock().unwrap().garbage;
            let reply = match op {
                PING | SET_WATCHES | CLOSE_SESSION => header(xid, 0),
                _ => match now {
                    Some(g) if !g.unprompted() => {
                        send_garbage(&mut stream, xid, g)?;
                        if g == Garbage::ClosedMidFrame {
                            return Ok(());
                        }
                        continue;
                    }
                    _ => header(xid, NO_NODE),
                },
            };
            stream.write_all(&framed(&reply))?;
        }
    })();
    // The client's reset: the end of the stream, or a write the client refused (not the
    // server's own read timeout, nor its own close after ClosedMidFrame).
    let reset = outcome.as_ref().is_err_and(|e| {
        matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
        )
    });
    if sent_garbage && reset && garbage.is_some_and(Garbage::client_closes) {
        update(&|s| s.closed_by_client += 1);
    }
    outcome
}

/// Sends `garbage` in place of the reply to `xid`.
fn misbehave(stream: &mut TcpStream, xid: i32, garbage: Garbage) -> io::Result<()> {
    match garbage {
        Garbage::ShortBody => {
            let mut reply = header(xid, 0);
            reply.extend([0, 0, 1]);
            stream.write_all(&framed(&reply))
        }
        Garbage::WrongType => {
            let mut reply = header(xid, 0);
            reply.extend(i64::MAX.to_be_bytes()); // czxid, read as a length of 2 GiB - 1
            reply.extend([0; 60]);
            stream.write_all(&framed(&reply))
        }
        Garbage::UnknownXid => stream.write_all(&framed(&header(4242, 0))),
        Garbage::HugeLength => {
            stream.write_all(&i32::MAX.to_be_bytes())?;
            stream.write_all(&header(xid, 0))?;
            stream_zeros(stream, 32 << 20)
        }
        Garbage::OverMaxBuffer => {
            stream.write_all(&((MAX_FRAME + 1) as i32).to_be_bytes())?;
            stream.write_all(&header(4242, 0))?;
            stream_zeros(stream, MAX_FRAME + 1 - 16)
        }
        Garbage::ClosedMidFrame => {
            let mut reply = header(xid, 0);
            reply.extend([0; 68]);
            let frame = framed(&reply);
            stream.write_all(&frame[..frame.len() / 2])?;
            stream.shutdown(Shutdown::Both)
        }
        Garbage::Trickle => {
            let mut reply = header(xid, 0);
            reply.extend([0; 200]);
            trickle(stream, &framed(&reply), Duration::from_millis(50))
        }
        Garbage::BadNotification => {
            let mut note = header(-1, 0);
            note.extend(3_i32.to_be_bytes()); // NodeDataChanged
            note.extend(3_i32.to_be_bytes()); // SyncConnected
            note.extend(0x7fff_fff0_i32.to_be_bytes()); // the path's length
            note.extend(b"/x");
            stream.write_all(&framed(&note))
        }
        // Written with the ConnectResponse.
        Garbage::AfterHandshake => Ok(()),
    }
}

/// Answers a ConnectRequest with `bad`, then waits for the client to give up.
fn bad_handshake(mut stream: TcpStream, bad: BadHandshake, timeout: i32) -> io::Result<()> {
    let id = 0x5eed;
    match bad {
        BadHandshake::TooShort => {
            stream.write_all(&framed(&connect_response(timeout, id, &[], 0)[..10]))?
        }
        BadHandshake::HugePassword => {
            stream.write_all(&framed(&connect_response(timeout, id, &[7; 16], i32::MAX)))?
        }
        BadHandshake::LongPassword => {
            stream.write_all(&framed(&connect_response(timeout, id, &[7; 1000], 1000)))?
        }
        BadHandshake::NegativeTimeout => {
            stream.write_all(&framed(&connect_response(-4000, id, &[7; 16], 16)))?
        }
        BadHandshake::ClosedMidFrame => {
            let frame = framed(&connect_response(timeout, id, &[7; 16], 16));
            stream.write_all(&frame[..frame.len() / 2])?;
            return stream.shutdown(Shutdown::Both);
        }
        BadHandshake::HugeLength => {
            stream.write_all(&i32::MAX.to_be_bytes())?;
            stream_zeros(&mut stream, 8 << 20)?;
        }
        BadHandshake::Trickle => {
            let mut frame = 1000_i32.to_be_bytes().to_vec();
            frame.extend(connect_response(timeout, id, &[7; 16], 16));
            frame.resize(1004, 0);
            return trickle(&mut stream, &frame, Duration::from_millis(50));
        }
    }
    // Wait for the client to close (or the read timeout).
    let mut sink = [0; 1024];
    while stream.read(&mut sink)? > 0 {}
    Ok(())
}

/// Every line zklock logs, for the checks that a reset was logged.
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, meta: &log::Metadata<'_>) -> bool {
        meta.level() <= log::Level::Info && meta.target().starts_with("zklock")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line = format!("{} {}", record.level(), record.args());
            LOGGED.lock().unwrap().push(line);
        }
    }

    fn flush(&self) {}
}

/// Installs the capturing logger, before any client of this test binary logs.
fn capture_logs() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        log::set_logger(&Capture).expect("the first logger");
        log::set_max_level(log::LevelFilter::Info);
    });
}

/// How many lines logged for `session` contain `text`.
fn logged(session: i64, text: &str) -> usize {
    let prefix = format!("session {session:#x}: ");
    LOGGED
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains(&prefix) && line.contains(text))
        .count()
}

/// The resident memory of this process, in bytes.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// The client's session on `server`, which behaves for the handshake.
fn connect(server: &FakeZk) -> zklock::Client {
    let client = common::builder(&server.addr, SESSION)
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .expect("the fake server grants a session");
    assert_eq!(client.session_id(), server.session_id);
    client
}

/// The garbage test: `garbage` on every connection, `ROUNDS` times; each round must end in a
/// reset the client logs, and a reconnect with the same session, with the process's memory
/// within [`MEMORY_BOUND`] of what it was before.
fn survives(garbage: Garbage) {
    capture_logs();
    let server = FakeZk::start();
    server.set(|s| {
        s.garbage = Some(garbage);
        s.down_after_garbage = true;
    });
    let client = connect(&server);
    let id = client.session_id();
    let before = rss();
    let mutex = DistributedMutex::new(&client, "/x").unwrap();
    for round in 0..ROUNDS {
        // Garbage sent in reply needs a request: a lock attempt, which must end by its
        // deadline, and cannot succeed (the server grants no lock).
        let started = Instant::now();
        let outcome = mutex.lock_timeout(LOCK_WAIT);
        let took = started.elapsed();
        assert!(
            took < LOCK_WAIT + LOCK_SLACK,
            "{garbage:?}, round {round}: lock_timeout({LOCK_WAIT:?}) took {took:?}"
        );
        assert!(
            !matches!(outcome, Ok(Some(_))),
            "{garbage:?}: a lock from a server that grants none"
        );
        assert!(
            server.wait(Duration::from_secs(3), |s| s.garbage_sent > round),
            "{garbage:?}, round {round}: the server sent no garbage"
        );
        // The memory is looked at once the reset is waited for: meanwhile a client that
        // believed a huge length would be taking its frame in.
        let closed = !garbage.client_closes()
            || server.wait(Duration::from_secs(4), |s| s.closed_by_client > round);
        let grown = rss().saturating_sub(before);
        assert!(
            grown < MEMORY_BOUND,
            "{garbage:?}, round {round}: the process grew by {} MiB",
            grown >> 20
        );
        assert!(
            closed,
            "{garbage:?}, round {round}: the client kept the connection that carried it"
        );
        // The server now refuses connections: the client is not Connected, and tries again.
        assert!(
            common::eventually(Duration::from_secs(2), || client.state()
                != SessionState::Connected),
            "{garbage:?}, round {round}: Connected while the server refuses it"
        );
        assert!(
            server.wait(Duration::from_secs(3), |s| s.refused > round),
            "{garbage:?}, round {round}: no reconnect attempt"
        );
        assert!(
            common::eventually(Duration::from_secs(2), || logged(id, "connection lost")
                > round),
            "{garbage:?}, round {round}: no reset logged"
        );
        // Back up: a new connection, for the same session.
        server.set(|s| s.down = false);
        assert!(
            server.wait(Duration::from_secs(4), |s| s.granted > round + 1),
            "{garbage:?}, round {round}: no new connection after the garbage"
        );
    }
    // A server that behaves: the session is back, the same one.
    server.set(|s| {
        s.garbage = None;
        s.down_after_garbage = false;
        s.down = false;
    });
    assert!(
        common::eventually(Duration::from_secs(4), || client.state()
            == SessionState::Connected),
        "{garbage:?}: not Connected once the server behaves ({:?})",
        client.state()
    );
    assert_eq!(client.session_id(), id, "{garbage:?}: a new session");
    let requests = server.get(|s| s.connect_requests.clone());
    assert!(
        requests[1..].iter().all(|&asked| asked == id),
        "{garbage:?}: reconnects asked for sessions {requests:x?}, not {id:#x}"
    );
}

#[test]
fn a_body_cut_short_resets_the_connection() {
    survives(Garbage::ShortBody);
}

#[test]
fn a_reply_of_the_wrong_type_resets_the_connection() {
    survives(Garbage::WrongType);
}

#[test]
fn a_reply_to_no_request_resets_the_connection() {
    survives(Garbage::UnknownXid);
}

#[test]
fn a_frame_announced_at_2_gib_allocates_nothing() {
    survives(Garbage::HugeLength);
}

#[test]
fn a_frame_over_the_limit_answering_no_request_resets_the_connection() {
    survives(Garbage::OverMaxBuffer);
}

#[test]
fn a_server_closing_mid_frame_is_a_lost_connection() {
    survives(Garbage::ClosedMidFrame);
}

#[test]
fn a_trickling_server_is_given_up() {
    survives(Garbage::Trickle);
}

#[test]
fn a_garbled_notification_resets_the_connection() {
    survives(Garbage::BadNotification);
}

#[test]
fn garbage_after_the_handshake_resets_the_connection() {
    survives(Garbage::AfterHandshake);
}

/// A server that answers every handshake with `bad`: the connect fails by its deadline, having
/// tried again after a bad answer.
fn first_connect_fails(bad: BadHandshake) {
    capture_logs();
    let server = FakeZk::start();
    server.set(|s| {
        s.bad_handshakes = usize::MAX;
        s.bad_handshake = Some(bad);
    });
    let connect_timeout = Duration::from_millis(1500);
    let started = Instant::now();
    let outcome = common::builder(&server.addr, SESSION)
        .connect_timeout(connect_timeout)
        .connect();
    let took = started.elapsed();
    assert!(outcome.is_err(), "{bad:?}: a session from a bad handshake");
    // Past the deadline, the connect only probes the host (at most a second).
    assert!(
        took < connect_timeout + Duration::from_secs(2),
        "{bad:?}: connect took {took:?} with a {connect_timeout:?} timeout"
    );
    // An attempt that fails at once is followed by another; a trickle takes the whole time.
    let attempts = if bad == BadHandshake::Trickle { 1 } else { 2 };
    assert!(
        server.get(|s| s.connect_requests.len()) >= attempts,
        "{bad:?}: {} attempts",
        server.get(|s| s.connect_requests.len())
    );
}

/// A session whose reconnect meets `bad` `times` in a row: each bad answer is a failed
/// attempt, the next attempt gets the session back, and the session lives on.
fn reconnect_survives(bad: BadHandshake, times: usize) {
    capture_logs();
    let server = FakeZk::start();
    let client = connect(&server);
    let id = client.session_id();
    server.set(|s| {
        s.bad_handshakes = times;
        s.bad_handshake = Some(bad);
    });
    server.cut();
    assert!(
        server.wait(Duration::from_secs(6), |s| s.granted >= 2),
        "{bad:?}: no session after {} connect requests",
        server.get(|s| s.connect_requests.len())
    );
    assert_eq!(server.get(|s| s.connect_requests.len()), 2 + times);
    assert!(
        common::eventually(Duration::from_secs(3), || client.state()
            == SessionState::Connected),
        "{bad:?}: {:?} after the reconnect",
        client.state()
    );
    assert_eq!(client.session_id(), id, "{bad:?}: a new session");
    let requests = server.get(|s| s.connect_requests.clone());
    assert!(
        requests[1..].iter().all(|&asked| asked == id),
        "{bad:?}: reconnects asked for sessions {requests:x?}, not {id:#x}"
    );
}

#[test]
fn a_short_connect_response_is_a_failed_attempt() {
    first_connect_fails(BadHandshake::TooShort);
    reconnect_survives(BadHandshake::TooShort, 2);
}

#[test]
fn a_huge_password_length_is_a_failed_attempt() {
    first_connect_fails(BadHandshake::HugePassword);
    reconnect_survives(BadHandshake::HugePassword, 2);
}

#[test]
fn a_long_password_is_a_failed_attempt() {
    first_connect_fails(BadHandshake::LongPassword);
    reconnect_survives(BadHandshake::LongPassword, 2);
}

#[test]
fn a_negative_session_timeout_is_a_failed_attempt_not_an_expiry() {
    first_connect_fails(BadHandshake::NegativeTimeout);
    reconnect_survives(BadHandshake::NegativeTimeout, 2);
}

#[test]
fn a_handshake_closed_mid_frame_is_a_failed_attempt() {
    first_connect_fails(BadHandshake::ClosedMidFrame);
    reconnect_survives(BadHandshake::ClosedMidFrame, 2);
}

#[test]
fn a_huge_connect_response_is_a_failed_attempt() {
    first_connect_fails(BadHandshake::HugeLength);
    reconnect_survives(BadHandshake::HugeLength, 2);
}

#[test]
fn a_trickled_handshake_is_given_up_by_its_deadline() {
    first_connect_fails(BadHandshake::Trickle);
    reconnect_survives(BadHandshake::Trickle, 1);
}

/// A server that answers every handshake and then sends garbage: the client keeps its session
/// and stays safe, but must not reconnect in a tight loop (it once did, thousands of times a
/// second): connections that die at once are followed by a growing pause.
#[test]
fn garbage_after_every_handshake_does_not_make_a_reconnect_storm() {
    let server = FakeZk::start();
    let client = connect(&server);
    let granted_before = server.get(|s| s.granted);
    server.set(|s| s.garbage = Some(Garbage::AfterHandshake));
    server.cut();
    thread::sleep(Duration::from_secs(3));
    let storm = server.get(|s| s.granted) - granted_before;
    // With pauses growing from 50 ms to 1 s, about 7 connections fit in 3 s; a tight loop
    // makes thousands.
    assert!(
        (1..=20).contains(&storm),
        "{storm} connections in 3 s against a server that sends garbage after each handshake"
    );
    server.set(|s| s.garbage = None);
    assert!(
        common::eventually(Duration::from_secs(4), || client.state()
            == SessionState::Connected),
        "not Connected once the server behaves ({:?})",
        client.state()
    );
}

/// A reconnect may be granted another session timeout (a server restarted with a lower
/// `maxSessionTimeout`): the server then expires the session by the new one, so the client's
/// pings, its silence limit and every holder's lease must follow. They once kept the first.
#[test]
fn a_reconnect_granted_a_shorter_timeout_is_followed() {
    let server = FakeZk::start();
    let client = connect(&server);
    let first = client.session_timeout();
    assert_eq!(first, SESSION);
    let shorter = SESSION / 2;
    server.set(|s| s.grant_ms = Some(shorter.as_millis() as i32));
    server.cut();
    assert!(
        common::eventually(Duration::from_secs(5), || client.session_timeout()
            == shorter),
        "still {:?} after a reconnect granted {shorter:?}",
        client.session_timeout()
    );
    // The handshake's reply sets the timeout a moment before the state turns Connected (the
    // watchers are told after the session's bookkeeping), so the state is awaited, not read.
    assert!(
        common::eventually(Duration::from_secs(5), || client.state()
            == SessionState::Connected),
        "{:?} after a reconnect granted {shorter:?}",
        client.state()
    );
    assert_eq!(client.session_timeout(), shorter);
}
