//! A fault-injecting TCP proxy on loopback: a client connects through it to the real server,
//! and a test can sever every connection or blackhole traffic (accept and read, never forward),
//! so the client sees silence rather than a reset. It can also record the requests clients send
//! (opcode, xid, path), to check which requests a recipe makes and in what order, and the
//! server's replies and handshakes, each with the instant the proxy saw it: the wire's own
//! timeline of a session, for tests that tell what the client did from what the server did.
//! It can delay what goes either way (requests; replies and notifications), keeping its order,
//! or pace the replies.
//!
//! The client's bytes are read as soon as the client sends them, whether or not the server is
//! reading (they wait in the proxy, not in the client's socket), so a request's instant is the
//! client's send, not the server's read. The server's bytes are read as they come too, and
//! forwarded (after the delay, paced if so) as the client reads them: a reply's instant is once
//! it is handed to the client's socket.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Shared {
    blackhole: AtomicBool,
    drop_replies: AtomicBool,
    refuse: AtomicBool,
    stop: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
    record: AtomicBool,
    requests: Mutex<Vec<Request>>,
    replies: Mutex<Vec<Reply>>,
    handshakes: Mutex<Vec<Handshake>>,
    /// While not 0, the server's replies are forwarded one frame per this many microseconds.
    reply_gap_us: AtomicU64,
    /// How long what the server sends waits before it is passed on, in microseconds.
    reply_delay_us: AtomicU64,
    /// While set, what the server sends is kept, then passed on at once (one write).
    hold_replies: AtomicBool,
    /// The same for what the clients send.
    request_delay_us: AtomicU64,
    /// While set, what the clients send is kept, then passed on in order.
    hold_requests: AtomicBool,
    /// Number of connections accepted so far (the next one's [`Request::conn`]).
    accepted: AtomicU64,
}

/// ZooKeeper request opcodes (`ZooDefs.OpCode`), as recorded in [`Request::opcode`].
pub mod opcode {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const MULTI_READ: i32 = 22;
    pub const CREATE2: i32 = 15;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const CREATE_TTL: i32 = 21;
    pub const AUTH: i32 = 100;
    pub const SET_WATCHES: i32 = 101;
    pub const CLOSE_SESSION: i32 = -11;

    /// Opcodes whose request body starts with the path (a jute `ustring`).
    pub(super) fn has_path(op: i32) -> bool {
        matches!(op, 1..=9 | 12 | 13 | 15 | 17..=21)
    }
}

/// One client-to-server request seen by the proxy (see [`Proxy::record_requests`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Which connection carried it: 0 for the first one the proxy accepted, and so on.
    pub conn: u64,
    /// The request's xid (-2 for pings, -8 for SetWatches, -4 for auth).
    pub xid: i32,
    /// The request's type (see [`opcode`]).
    pub opcode: i32,
    /// The path, for requests whose body starts with one (chroot included, as sent).
    pub path: Option<String>,
    /// A `multi`'s or `multiRead`'s operations, each its opcode and path (empty for other
    /// requests, and for one whose body does not parse).
    pub members: Vec<(i32, String)>,
    /// When the proxy read it from the client.
    pub at: Instant,
}

/// One server-to-client reply seen by the proxy while recording (notifications and ping
/// replies included: xid -1 and -2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Which connection carried it (as [`Request::conn`]).
    pub conn: u64,
    /// The xid of the request it answers.
    pub xid: i32,
    /// The reply header's error code (0: done).
    pub err: i32,
    /// When the proxy had handed it to the client's socket.
    pub at: Instant,
}

/// One connection's session handshake seen by the proxy while recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// Which connection (as [`Request::conn`]).
    pub conn: u64,
    /// When the proxy read the client's ConnectRequest.
    pub sent: Instant,
    /// When the proxy had handed the server's ConnectResponse to the client, and the
    /// session timeout it granted (0: the session has expired).
    pub answered: Option<(Instant, i32)>,
}

pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (`host:port`) on an ephemeral loopback port.
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let upstream = upstream.to_owned();
        let state = shared.clone();
        listener.set_nonblocking(true).unwrap();
        thread::spawn(move || {
            while !state.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((down, _)) => {
                        if state.refuse.load(Ordering::SeqCst) {
                            drop(down);
                            continue;
                        }
                        let conn = state.accepted.fetch_add(1, Ordering::SeqCst);
                        down.set_nonblocking(false).unwrap();
                        let Ok(up) = TcpStream::connect(&upstream) else {
                            continue;
                        };
                        let _ = up.set_nodelay(true);
                        let _ = down.set_nodelay(true);
                        state
                            .conns
                            .lock()
                            .unwrap()
                            .extend([down.try_clone().unwrap(), up.try_clone().unwrap()]);
                        let requests = FrameParser {
                            conn,
                            from_client: true,
                            buf: Vec::new(),
                            handshake_done: false,
                        };
                        let replies = FrameParser {
                            from_client: false,
                            ..requests.clone()
                        };
                        pump_requests(
                            down.try_clone().unwrap(),
                            up.try_clone().unwrap(),
                            state.clone(),
                            requests,
                        );
                        pump_replies(up, down, state.clone(), replies);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy { addr, shared }
    }

    /// `127.0.0.1:<port>` of the proxy.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Drops every open connection (the client sees a reset and reconnects).
    pub fn sever(&self) {
        for conn in self.shared.conns.lock().unwrap().drain(..) {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }

    /// Stops forwarding in both directions without closing anything.
    pub fn blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::SeqCst);
    }

    /// Forwards requests to the server but swallows everything it sends back: requests execute,
    /// their replies are lost.
    pub fn drop_replies(&self, on: bool) {
        self.shared.drop_replies.store(on, Ordering::SeqCst);
    }

    /// Forwards the server's replies one frame (a reply, a notification, a handshake) per
    /// `gap` while `Some`: a slow server, or a slow link, that still says something often
    /// enough for the client not to take it for dead. `None` forwards as they come again.
    pub fn pace_replies(&self, gap: Option<Duration>) {
        let us = gap.map_or(0, |gap| gap.as_micros().max(1) as u64);
        self.shared.reply_gap_us.store(us, Ordering::SeqCst);
    }

    /// Holds everything the server sends (replies and watch notifications) for `delay` before
    /// passing it on, in order; requests go through at once. `Duration::ZERO` turns it off.
    pub fn delay_replies(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.reply_delay_us.store(micros, Ordering::SeqCst);
    }

    /// While `on`, keeps everything the server sends; turned off, passes it all on in one
    /// write, in order: the client then reads a burst of replies at once.
    pub fn hold_replies(&self, on: bool) {
        self.shared.hold_replies.store(on, Ordering::SeqCst);
    }

    /// Holds every request the clients send for `delay` before passing it on, in order.
    /// `Duration::ZERO` turns it off.
    pub fn delay_requests(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.request_delay_us.store(micros, Ordering::SeqCst);
    }

    /// While `on`, keeps every request the clients send (pings included) that has not been
    /// passed on yet; turned off, passes them on in order. The server hears nothing meanwhile:
    /// keep it short of the session timeout.
    pub fn hold_requests(&self, on: bool) {
        self.shared.hold_requests.store(on, Ordering::SeqCst);
    }

    /// Refuses new connections (closes them at once) while on.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Records every request clients send through the proxy while on (off at start), as the
    /// client sent it: a request swallowed by [`blackhole`](Self::blackhole) is recorded too.
    /// Each connection's ConnectRequest is not a request here but a [`Handshake`]; pings, auth
    /// and SetWatches are recorded. Replies forwarded meanwhile are recorded too
    /// ([`replies`](Self::replies)).
    pub fn record_requests(&self, on: bool) {
        self.shared.record.store(on, Ordering::SeqCst);
    }

    /// The requests recorded so far, in the order the proxy read them (exact within one
    /// connection; across connections, as the proxy's threads happened to read them).
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The replies forwarded to clients while recording, in the order the proxy forwarded
    /// them (exact within one connection).
    pub fn replies(&self) -> Vec<Reply> {
        self.shared.replies.lock().unwrap().clone()
    }

    /// The session handshakes seen while recording, in the order of their connections.
    pub fn handshakes(&self) -> Vec<Handshake> {
        self.shared.handshakes.lock().unwrap().clone()
    }

    /// Forgets the requests (replies, handshakes) recorded so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().unwrap().clear();
        self.shared.replies.lock().unwrap().clear();
        self.shared.handshakes.lock().unwrap().clear();
    }
}

/// Splits one direction of a connection's byte stream into ZooKeeper frames (4-byte
/// big-endian length, then the body). The first frame each way is the handshake; every later
/// request starts with xid and type, every later reply with xid, zxid and error code.
#[derive(Clone)]
struct FrameParser {
    conn: u64,
    from_client: bool,
    buf: Vec<u8>,
    handshake_done: bool,
}

impl FrameParser {
    /// Reads the frames `bytes` completes, seen at `at`.
    fn feed(&mut self, bytes: &[u8], state: &Shared, at: Instant) {
        self.buf.extend_from_slice(bytes);
        loop {
            let Some(len) = self.buf.get(..4).map(|b| be_i32(b) as usize) else {
                return;
            };
            if self.buf.len() < 4 + len {
                return;
            }
            let frame: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
            let handshake = !std::mem::replace(&mut self.handshake_done, true);
            if !state.record.load(Ordering::SeqCst) {
                continue;
            }
            match (handshake, self.from_client) {
                (true, true) => state.handshakes.lock().unwrap().push(Handshake {
                    conn: self.conn,
                    sent: at,
                    answered: None,
                }),
                (true, false) if frame.len() >= 8 => {
                    let timeout = be_i32(&frame[4..8]);
                    let mut handshakes = state.handshakes.lock().unwrap();
                    if let Some(h) = handshakes.iter_mut().rev().find(|h| h.conn == self.conn) {
                        h.answered = Some((at, timeout));
                    }
                }
                (false, true) if frame.len() >= 8 => self.request(&frame, state, at),
                (false, false) if frame.len() >= 16 => state.replies.lock().unwrap().push(Reply {
                    conn: self.conn,
                    xid: be_i32(&frame[..4]),
                    err: be_i32(&frame[12..16]),
                    at,
                }),
                _ => {}
            }
        }
    }

    fn request(&self, frame: &[u8], state: &Shared, at: Instant) {
        let opcode = be_i32(&frame[4..8]);
        let path = if opcode::has_path(opcode) && frame.len() >= 12 {
            let n = be_i32(&frame[8..12]).max(0) as usize;
            frame
                .get(12..12 + n)
                .map(|p| String::from_utf8_lossy(p).into_owned())
        } else {
            None
        };
        let members = if opcode == opcode::MULTI || opcode == opcode::MULTI_READ {
            multi_members(&frame[8..]).unwrap_or_default()
        } else {
            Vec::new()
        };
        state.requests.lock().unwrap().push(Request {
            conn: self.conn,
            xid: be_i32(&frame[..4]),
            opcode,
            path,
            members,
            at,
        });
    }
}

/// The operations of a `multi` request's body (jute: a `MultiHeader` {type, done, err} before
/// each operation, one with `done` set last), each its opcode and path; `None` if it does not
/// parse.
fn multi_members(body: &[u8]) -> Option<Vec<(i32, String)>> {
    let mut at = 0;
    let int = |at: &mut usize| -> Option<i32> {
        let v = i32::from_be_bytes(body.get(*at..*at + 4)?.try_into().ok()?);
        *at += 4;
        Some(v)
    };
    let bytes = |at: &mut usize| -> Option<&[u8]> {
        let n = int(at)?.max(0) as usize;
        let v = body.get(*at..*at + n)?;
        *at += n;
        Some(v)
    };
    let mut members = Vec::new();
    loop {
        let op = int(&mut at)?;
        let done = *body.get(at)? != 0;
        at += 1;
        int(&mut at)?; // err
        if done {
            return Some(members);
        }
        let path = String::from_utf8_lossy(bytes(&mut at)?).into_owned();
        match op {
            // CreateRequest {path, data, acl, flags} (+ ttl for CreateTTL).
            opcode::CREATE | opcode::CREATE2 | opcode::CREATE_CONTAINER | opcode::CREATE_TTL => {
                bytes(&mut at)?;
                for _ in 0..int(&mut at)? {
                    int(&mut at)?; // perms
                    bytes(&mut at)?; // scheme
                    bytes(&mut at)?; // id
                }
                int(&mut at)?; // flags
                if op == opcode::CREATE_TTL {
                    at += 8;
                }
            }
            // {path, version}
            opcode::DELETE | opcode::CHECK => {
                int(&mut at)?;
            }
            // {path, data, version}
            opcode::SET_DATA => {
                bytes(&mut at)?;
                int(&mut at)?;
            }
            // {path, watch} (a read-only multi)
            opcode::GET_CHILDREN | opcode::GET_DATA => at += 1,
            _ => return None,
        }
        members.push((op, path));
    }
}

fn be_i32(bytes: &[u8]) -> i32 {
    i32::from_be_bytes(bytes[..4].try_into().unwrap())
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.sever();
    }
}

/// Forwards the client's bytes (`from`) to the server (`to`), reading them as the client
/// sends them: a thread of its own writes them on, so a server that does not read holds them
/// here, never in the client's socket, and their recorded instants are the client's sends.
fn pump_requests(mut from: TcpStream, to: TcpStream, state: Arc<Shared>, mut parser: FrameParser) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let (writer_from, mut writer_to) = (from.try_clone().unwrap(), to);
    let writer_state = state.clone();
    thread::spawn(move || {
        for (due, bytes) in rx {
            thread::sleep(due.saturating_duration_since(Instant::now()));
            while writer_state.hold_requests.load(Ordering::SeqCst)
                && !writer_state.stop.load(Ordering::SeqCst)
            {
                thread::sleep(Duration::from_millis(1));
            }
            if writer_to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = writer_to.shutdown(Shutdown::Both);
        let _ = writer_from.shutdown(Shutdown::Both);
    });
    thread::spawn(move || {
        read_into(&mut from, tx, |bytes| {
            parser.feed(bytes, &state, Instant::now());
            let swallowed = state.blackhole.load(Ordering::SeqCst);
            (!swallowed).then(|| state.request_delay_us.load(Ordering::SeqCst))
        });
    });
}

/// Reads `from` until it ends, sending each chunk on `tx` due after the delay `admit` gives it
/// in microseconds (`None`: swallowed). Ending drops `tx`: the writer then shuts both sides
/// once it has written what was read before (the last requests, say a CloseSession, and the
/// replies to them still go through).
fn read_into(
    from: &mut TcpStream,
    tx: mpsc::Sender<(Instant, Vec<u8>)>,
    mut admit: impl FnMut(&[u8]) -> Option<u64>,
) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let Some(delay_us) = admit(&buf[..n]) else {
            continue; // swallowed
        };
        let due = Instant::now() + Duration::from_micros(delay_us);
        if tx.send((due, buf[..n].to_vec())).is_err() {
            break;
        }
    }
}

/// Forwards the server's bytes (`from`) to the client (`to`), as the client reads them, after
/// [`Proxy::delay_replies`], and one frame per [`Proxy::pace_replies`] gap while that is set.
fn pump_replies(from: TcpStream, mut to: TcpStream, state: Arc<Shared>, mut parser: FrameParser) {
    // Read as they come, each chunk due after the reply delay; written on (paced, if so) by a
    // thread of its own, so that a delay holds every reply the same time, never adding up.
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let mut reader_from = from.try_clone().unwrap();
    let reader_state = state.clone();
    thread::spawn(move || {
        let state = reader_state;
        read_into(&mut reader_from, tx, |_| {
            let swallowed =
                state.blackhole.load(Ordering::SeqCst) || state.drop_replies.load(Ordering::SeqCst);
            (!swallowed).then(|| state.reply_delay_us.load(Ordering::SeqCst))
        });
    });
    thread::spawn(move || {
        let mut unsent: Vec<u8> = Vec::new();
        'write: loop {
            // While something is kept (`hold_replies`), woken now and then without a chunk
            // to pass it on once the hold ends; otherwise asleep until the next chunk.
            let next = if unsent.is_empty() {
                rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
            } else {
                rx.recv_timeout(Duration::from_millis(5))
            };
            match next {
                Ok((due, bytes)) => {
                    thread::sleep(due.saturating_duration_since(Instant::now()));
                    unsent.extend_from_slice(&bytes);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if state.hold_replies.load(Ordering::SeqCst) {
                continue;
            }
            loop {
                let gap = Duration::from_micros(state.reply_gap_us.load(Ordering::SeqCst));
                let frame_end = unsent
                    .get(..4)
                    .map(|len| 4 + be_i32(len).max(0) as usize)
                    .filter(|end| *end <= unsent.len());
                let upto = match (gap.is_zero(), frame_end) {
                    (true, _) => unsent.len(),
                    (false, Some(end)) => end,
                    (false, None) => break,
                };
                if upto == 0 {
                    break;
                }
                if to.write_all(&unsent[..upto]).is_err() {
                    break 'write;
                }
                parser.feed(&unsent[..upto], &state, Instant::now());
                unsent.drain(..upto);
                if !gap.is_zero() {
                    thread::sleep(gap);
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
