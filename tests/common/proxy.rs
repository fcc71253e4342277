//! A fault-injecting TCP proxy on loopback: a client connects through it to the real server,
//! and a test can sever every connection or blackhole traffic (accept and read, never forward),
//! so the client sees silence rather than a reset. It can also record the requests clients send
//! (opcode, xid, path), to check which requests a recipe makes and in what order, and delay
//! what goes either way (requests; replies and notifications), keeping its order.

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
    /// Number of connections accepted so far (the next one's [`Request::conn`]).
    accepted: AtomicU64,
    /// How long what the server sends waits before it is passed on, in microseconds.
    reply_delay_us: AtomicU64,
    /// The same for what the clients send.
    request_delay_us: AtomicU64,
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
                        let requests = RequestParser {
                            conn,
                            buf: Vec::new(),
                            handshake_done: false,
                        };
                        pump(
                            down.try_clone().unwrap(),
                            up.try_clone().unwrap(),
                            state.clone(),
                            Some(requests),
                        );
                        pump(up, down, state.clone(), None);
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

    /// Holds everything the server sends (replies and watch notifications) for `delay` before
    /// passing it on, in order; requests go through at once. `Duration::ZERO` turns it off.
    pub fn delay_replies(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.reply_delay_us.store(micros, Ordering::SeqCst);
    }

    /// Holds every request the clients send for `delay` before passing it on, in order.
    /// `Duration::ZERO` turns it off.
    pub fn delay_requests(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.request_delay_us.store(micros, Ordering::SeqCst);
    }

    /// Refuses new connections (closes them at once) while on.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Records every request clients send through the proxy while on (off at start), as the
    /// client sent it: a request swallowed by [`blackhole`](Self::blackhole) is recorded too.
    /// Each connection's ConnectRequest is skipped; pings, auth and SetWatches are recorded.
    pub fn record_requests(&self, on: bool) {
        self.shared.record.store(on, Ordering::SeqCst);
    }

    /// The requests recorded so far, in the order the proxy read them (exact within one
    /// connection; across connections, as the proxy's threads happened to read them).
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Forgets the requests recorded so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().unwrap().clear();
    }
}

/// Splits one connection's client-to-server byte stream into ZooKeeper frames (4-byte
/// big-endian length, then the body; the first frame is the ConnectRequest, every later one
/// starts with xid and type).
struct RequestParser {
    conn: u64,
    buf: Vec<u8>,
    handshake_done: bool,
}

impl RequestParser {
    fn feed(&mut self, bytes: &[u8], state: &Shared) {
        self.buf.extend_from_slice(bytes);
        loop {
            let Some(len) = self.buf.get(..4).map(|b| be_i32(b) as usize) else {
                return;
            };
            if self.buf.len() < 4 + len {
                return;
            }
            let frame: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
            if !std::mem::replace(&mut self.handshake_done, true) || frame.len() < 8 {
                continue;
            }
            let opcode = be_i32(&frame[4..8]);
            let path = if opcode::has_path(opcode) && frame.len() >= 12 {
                let n = be_i32(&frame[8..12]).max(0) as usize;
                frame
                    .get(12..12 + n)
                    .map(|p| String::from_utf8_lossy(p).into_owned())
            } else {
                None
            };
            if state.record.load(Ordering::SeqCst) {
                state.requests.lock().unwrap().push(Request {
                    conn: self.conn,
                    xid: be_i32(&frame[..4]),
                    opcode,
                    path,
                });
            }
        }
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

/// Forwards `from` to `to` (a thread of its own writes, each chunk when its delay is up);
/// `requests` parses the client's side (absent for the replies).
fn pump(
    mut from: TcpStream,
    to: TcpStream,
    state: Arc<Shared>,
    mut requests: Option<RequestParser>,
) {
    let replies = requests.is_none();
    let sink = delayed_writer(to);
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Some(parser) = &mut requests {
                parser.feed(&buf[..n], &state);
            }
            if state.blackhole.load(Ordering::SeqCst)
                || (replies && state.drop_replies.load(Ordering::SeqCst))
            {
                continue; // swallowed
            }
            let delay = if replies {
                &state.reply_delay_us
            } else {
                &state.request_delay_us
            };
            let due = Instant::now() + Duration::from_micros(delay.load(Ordering::SeqCst));
            if sink.send((due, buf[..n].to_vec())).is_err() {
                break;
            }
        }
        // The writer shuts its stream once it has written what was sent before.
        drop(sink);
        let _ = from.shutdown(Shutdown::Both);
    });
}

/// A thread that writes to `to` what it is sent, each chunk once its time has come, in order.
fn delayed_writer(mut to: TcpStream) -> mpsc::Sender<(Instant, Vec<u8>)> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        for (due, bytes) in rx {
            let wait = due.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                thread::sleep(wait);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
    tx
}
