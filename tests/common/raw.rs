//! A bare ZooKeeper session for the tests, written against the wire protocol itself: no zklock
//! (the tests use it to look at and change nodes behind zklock's back, so it must not share
//! zklock's transport or its bugs) and no client crate (that would keep one in the dependency
//! graph). Blocking, one connection under a mutex, only the requests the tests send.
//!
//! It panics on anything unexpected, with the path and ZooKeeper's error name, and never
//! hangs: every read and write on the socket has a timeout.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The bound on every socket read and write (and on connecting): long enough for a loaded
/// machine, short enough that a dead server fails the test instead of hanging it.
const IO_TIMEOUT: Duration = Duration::from_secs(15);
/// The session timeout asked for; the ping thread keeps the session alive between calls.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The bound on closing the session when the client is dropped (a drop must not wait long for
/// a server that a test has stopped or frozen).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

const OP_CREATE: i32 = 1;
const OP_DELETE: i32 = 2;
const OP_EXISTS: i32 = 3;
const OP_SET_ACL: i32 = 7;
const OP_GET_CHILDREN: i32 = 8;
const OP_PING: i32 = 11;
const OP_MULTI: i32 = 14;
const OP_CREATE_CONTAINER: i32 = 19;
const OP_CLOSE_SESSION: i32 = -11;
const OP_ERROR: i32 = -1;

const XID_NOTIFICATION: i32 = -1;
const XID_PING: i32 = -2;

const FLAG_EPHEMERAL: i32 = 1;
const FLAG_EPHEMERAL_SEQUENTIAL: i32 = 3;
const FLAG_CONTAINER: i32 = 4;

const OK: i32 = 0;
const NO_NODE: i32 = -101;
const NODE_EXISTS: i32 = -110;

/// ZooKeeper's name for an error code, for panic messages.
fn code_name(code: i32) -> String {
    let name = match code {
        -1 => "SystemError",
        -2 => "RuntimeInconsistency",
        -3 => "DataInconsistency",
        -4 => "ConnectionLoss",
        -5 => "MarshallingError",
        -6 => "Unimplemented",
        -7 => "OperationTimeout",
        -8 => "BadArguments",
        -100 => "APIError",
        -101 => "NoNode",
        -102 => "NoAuth",
        -103 => "BadVersion",
        -108 => "NoChildrenForEphemerals",
        -110 => "NodeExists",
        -111 => "NotEmpty",
        -112 => "SessionExpired",
        -114 => "InvalidACL",
        -118 => "SessionMoved",
        -119 => "NotReadOnly",
        -120 => "EphemeralOnLocalSession",
        _ => "unknown",
    };
    format!("{name} ({code})")
}

/// A node's stat, field for field as the server sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    pub pzxid: i64,
}

/// Jute encoding into a request body.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn int(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn long(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bool(mut self, v: bool) -> Self {
        self.0.push(u8::from(v));
        self
    }
    fn buffer(self, v: &[u8]) -> Self {
        let mut out = self.int(i32::try_from(v.len()).expect("buffer too long"));
        out.0.extend_from_slice(v);
        out
    }
    fn string(self, v: &str) -> Self {
        self.buffer(v.as_bytes())
    }
    /// The create body, for create and createContainer alike: no data, world:anyone ALL.
    fn create(self, path: &str, flags: i32) -> Self {
        self.create_for_anyone(path, flags, 31)
    }
    /// The create body of a node whose one ACL entry gives world:anyone `perms`.
    fn create_for_anyone(self, path: &str, flags: i32, perms: i32) -> Self {
        self.string(path)
            .buffer(b"")
            .int(1)
            .int(perms)
            .string("world")
            .string("anyone")
            .int(flags)
    }
    /// The delete body: any version.
    fn delete(self, path: &str) -> Self {
        self.string(path).int(-1)
    }
}

/// Jute decoding of a reply body; a short body panics, naming what was being read.
struct In<'a>(&'a [u8]);

impl In<'_> {
    fn take<const N: usize>(&mut self, what: &str) -> [u8; N] {
        assert!(self.0.len() >= N, "raw client: reply too short for {what}");
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        head.try_into().unwrap()
    }
    fn int(&mut self, what: &str) -> i32 {
        i32::from_be_bytes(self.take(what))
    }
    fn long(&mut self, what: &str) -> i64 {
        i64::from_be_bytes(self.take(what))
    }
    fn bool(&mut self, what: &str) -> bool {
        self.take::<1>(what)[0] != 0
    }
    fn string(&mut self, what: &str) -> String {
        let len = usize::try_from(self.int(what)).unwrap_or(0);
        assert!(
            self.0.len() >= len,
            "raw client: reply too short for {what}"
        );
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8(head.to_vec())
            .unwrap_or_else(|e| panic!("raw client: {what} is not UTF-8: {e}"))
    }
    fn stat(&mut self) -> Stat {
        Stat {
            czxid: self.long("czxid"),
            mzxid: self.long("mzxid"),
            ctime: self.long("ctime"),
            mtime: self.long("mtime"),
            version: self.int("version"),
            cversion: self.int("cversion"),
            aversion: self.int("aversion"),
            ephemeral_owner: self.long("ephemeralOwner"),
            data_length: self.int("dataLength"),
            num_children: self.int("numChildren"),
            pzxid: self.long("pzxid"),
        }
    }
}

/// One reply: the error code of its header and the body that follows it.
struct Reply {
    err: i32,
    body: Vec<u8>,
}

/// The connection, shared by the callers and the ping thread. Once an I/O error leaves the
/// stream in an unknown state, `broken` says why and nothing more is sent on it.
struct Conn {
    stream: TcpStream,
    xid: i32,
    broken: Option<String>,
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut framed = Out::default().int(body.len() as i32).0;
    framed.extend_from_slice(body);
    framed
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    // A sanity bound, not jute.maxbuffer (a listing may exceed that): more is a garbled stream.
    if !(0..=64 << 20).contains(&len) {
        return Err(std::io::Error::other(format!("frame length {len}")));
    }
    let mut body = vec![0; len as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

impl Conn {
    /// Writes every request before reading any reply, so the server receives them as one
    /// burst and, answering a session in order, applies them in this order.
    fn exchange(&mut self, requests: &[(i32, Vec<u8>)]) -> std::io::Result<Vec<Reply>> {
        let first = self.xid + 1;
        let mut burst = Vec::new();
        for (op, body) in requests {
            self.xid += 1;
            let mut request = Out::default().int(self.xid).int(*op).0;
            request.extend_from_slice(body);
            burst.extend_from_slice(&frame(&request));
        }
        self.stream.write_all(&burst)?;
        let mut replies = Vec::with_capacity(requests.len());
        let mut expected = first;
        while replies.len() < requests.len() {
            let (xid, err, body) = self.read_reply()?;
            if xid == XID_NOTIFICATION {
                continue; // no watches are set, but a notification would not be a reply
            }
            if xid != expected {
                return Err(std::io::Error::other(format!(
                    "reply xid {xid}, expected {expected}"
                )));
            }
            expected += 1;
            replies.push(Reply { err, body });
        }
        Ok(replies)
    }

    fn read_reply(&mut self) -> std::io::Result<(i32, i32, Vec<u8>)> {
        let frame = read_frame(&mut self.stream)?;
        // An error, not a panic under the lock: the connection must be marked broken.
        if frame.len() < 16 {
            return Err(std::io::Error::other(format!("{}-byte reply", frame.len())));
        }
        let mut header = In(&frame);
        let xid = header.int("xid");
        let _zxid = header.long("zxid");
        let err = header.int("err");
        Ok((xid, err, header.0.to_vec()))
    }

    fn ping(&mut self) -> std::io::Result<()> {
        self.stream
            .write_all(&frame(&Out::default().int(XID_PING).int(OP_PING).0))?;
        loop {
            match self.read_reply()?.0 {
                XID_PING => return Ok(()),
                XID_NOTIFICATION => {}
                xid => return Err(std::io::Error::other(format!("xid {xid} for a ping"))),
            }
        }
    }
}

/// A bare ZooKeeper session (no zklock in between), for looking at and changing nodes behind
/// zklock's back: raw stats, listings, recursive and back-to-back deletes. A thread of its own
/// pings the server, so the session lives as long as the value, however idle; dropping it
/// closes the session (its ephemeral nodes go at once).
pub struct RawClient {
    conn: Arc<Mutex<Conn>>,
    server: String,
    /// Dropped to stop the ping thread at once.
    stop: Option<mpsc::Sender<()>>,
    pinger: Option<JoinHandle<()>>,
}

impl RawClient {
    /// Connects to `connect_string` (hosts, tried in order; a chroot is ignored).
    pub fn connect(connect_string: &str) -> RawClient {
        let hosts = connect_string.split('/').next().unwrap_or_default();
        let mut failures = Vec::new();
        for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            match Self::handshake(host) {
                Ok((stream, timeout)) => return Self::start(host, stream, timeout),
                Err(err) => failures.push(format!("{host}: {err}")),
            }
        }
        panic!("raw client: no session with {connect_string:?}: {failures:?}")
    }

    /// A new session on `host`, and its negotiated timeout.
    fn handshake(host: &str) -> std::io::Result<(TcpStream, Duration)> {
        let addr = host
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::other("no address"))?;
        let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let request = Out::default()
            .int(0) // protocolVersion
            .long(0) // lastZxidSeen
            .int(SESSION_TIMEOUT.as_millis() as i32)
            .long(0) // sessionId: a new session
            .buffer(&[0; 16])
            .bool(false); // readOnly
        stream.write_all(&frame(&request.0))?;
        let response = read_frame(&mut stream)?;
        let mut response = In(&response);
        let _protocol_version = response.int("protocolVersion");
        let timeout = response.int("timeOut");
        // A server that cannot serve (no quorum, say) answers with no timeout, or closes.
        if timeout <= 0 {
            return Err(std::io::Error::other("session refused"));
        }
        Ok((stream, Duration::from_millis(timeout as u64)))
    }

    fn start(host: &str, stream: TcpStream, timeout: Duration) -> RawClient {
        let conn = Arc::new(Mutex::new(Conn {
            stream,
            xid: 0,
            broken: None,
        }));
        let (stop, stopped) = mpsc::channel::<()>();
        let shared = Arc::clone(&conn);
        let pinger = std::thread::spawn(move || {
            // A third of the session timeout, as ZooKeeper's own clients do, leaves two more
            // chances before the server gives up on the session.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(timeout / 3) {
                let mut conn = shared.lock().unwrap_or_else(PoisonError::into_inner);
                if conn.broken.is_some() {
                    return;
                }
                if let Err(err) = conn.ping() {
                    // Not a panic here: the next call reports it, if the test makes one.
                    conn.broken = Some(format!("ping: {err}"));
                    return;
                }
            }
        });
        RawClient {
            conn,
            server: host.to_owned(),
            stop: Some(stop),
            pinger: Some(pinger),
        }
    }

    /// Sends `requests` back to back and returns their replies, in order; panics on a
    /// connection error (the test cannot go on without the server).
    fn call(&self, requests: &[(i32, Vec<u8>)]) -> Vec<Reply> {
        let outcome = {
            let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(why) = &conn.broken {
                Err(why.clone())
            } else {
                conn.exchange(requests).map_err(|err| {
                    conn.broken = Some(err.to_string());
                    err.to_string()
                })
            }
        };
        outcome
            .unwrap_or_else(|why| panic!("raw client: connection to {} broken: {why}", self.server))
    }

    fn call_one(&self, op: i32, body: Out) -> Reply {
        self.call(&[(op, body.0)]).pop().unwrap()
    }

    /// The node's stat, `None` if there is no node at `path`. (A stat does not tell container
    /// from persistent nodes: the server shows both with `ephemeral_owner` 0.)
    pub fn stat(&self, path: &str) -> Option<Stat> {
        let reply = self.call_one(OP_EXISTS, Out::default().string(path).bool(false));
        match reply.err {
            OK => Some(In(&reply.body).stat()),
            NO_NODE => None,
            err => panic!("raw client: exists {path}: {}", code_name(err)),
        }
    }

    /// Whether there is a node at `path`.
    pub fn exists(&self, path: &str) -> bool {
        self.stat(path).is_some()
    }

    /// The children of `path` (empty if it does not exist).
    pub fn children(&self, path: &str) -> Vec<String> {
        let reply = self.call_one(OP_GET_CHILDREN, Out::default().string(path).bool(false));
        match reply.err {
            OK => {
                let mut body = In(&reply.body);
                let count = body.int("children count").max(0);
                (0..count).map(|_| body.string("child name")).collect()
            }
            NO_NODE => Vec::new(),
            err => panic!("raw client: getChildren {path}: {}", code_name(err)),
        }
    }

    /// Top-level nodes whose name contains `tag`, sorted: what a bad path with `tag` in it left.
    pub fn top_level_with(&self, tag: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .children("/")
            .into_iter()
            .filter(|name| name.contains(tag))
            .collect();
        found.sort();
        found
    }

    /// Creates `path` and its missing ancestors as container nodes anyone may use.
    pub fn mkdir_open(&self, path: &str) {
        let ancestors: Vec<&str> = path
            .match_indices('/')
            .skip(1)
            .map(|(i, _)| &path[..i])
            .chain([path])
            .collect();
        let requests: Vec<(i32, Vec<u8>)> = ancestors
            .iter()
            .map(|dir| {
                let body = Out::default().create(dir, FLAG_CONTAINER);
                (OP_CREATE_CONTAINER, body.0)
            })
            .collect();
        for (reply, dir) in self.call(&requests).into_iter().zip(ancestors) {
            if reply.err != OK && reply.err != NODE_EXISTS {
                panic!(
                    "raw client: creating container {dir}: {}",
                    code_name(reply.err)
                );
            }
        }
    }

    /// Deletes `paths` (which must exist) back to back: every request is sent before the
    /// first reply is read, so the server applies them as one burst, in this order.
    pub fn delete_back_to_back(&self, paths: &[&str]) {
        let requests: Vec<(i32, Vec<u8>)> = paths
            .iter()
            .map(|path| (OP_DELETE, Out::default().delete(path).0))
            .collect();
        for (reply, path) in self.call(&requests).into_iter().zip(paths) {
            if reply.err != OK {
                panic!("raw client: deleting {path}: {}", code_name(reply.err));
            }
        }
    }

    /// Deletes `paths` (which must exist) in one transaction, in this order.
    pub fn delete_in_one_multi(&self, paths: &[&str]) {
        let mut body = Out::default();
        for path in paths {
            // Each op: a header {type, done, err}, then the op's own body.
            body = body.int(OP_DELETE).bool(false).int(-1).delete(path);
        }
        let reply = self.call_one(OP_MULTI, body.int(-1).bool(true).int(-1));
        let mut results = In(&reply.body);
        // A failed transaction may come as error results or, with no body, in the header.
        if reply.err != OK && results.0.is_empty() {
            panic!(
                "raw client: multi delete {paths:?}: {}",
                code_name(reply.err)
            );
        }
        for path in paths {
            let op = results.int("multi result type");
            let _done = results.bool("multi result done");
            let err = results.int("multi result err");
            if op == OP_ERROR {
                let err = results.int("multi error");
                if err != OK {
                    panic!("raw client: multi delete of {path}: {}", code_name(err));
                }
            } else if op != OP_DELETE || err != OK {
                panic!(
                    "raw client: multi delete of {path}: result {op}, {}",
                    code_name(err)
                );
            }
        }
    }

    /// Deletes `path` and everything below it; nothing happens if it does not exist.
    pub fn delete_tree(&self, path: &str) {
        for child in self.children(path) {
            self.delete_tree(&format!("{path}/{child}"));
        }
        match self.call_one(OP_DELETE, Out::default().delete(path)).err {
            OK | NO_NODE => {}
            err => panic!("raw client: deleting {path}: {}", code_name(err)),
        }
    }

    /// Creates the persistent node `path` (world:anyone ALL, no data), whose parent must
    /// exist: unlike a container, it stays when empty, whatever its child counter says.
    pub fn create_persistent(&self, path: &str) {
        let reply = self.call_one(OP_CREATE, Out::default().create(path, 0));
        if reply.err != OK {
            panic!(
                "raw client: creating persistent {path}: {}",
                code_name(reply.err)
            );
        }
    }

    /// Queues `count` ephemeral sequential nodes named `prefix` + sequence number in this
    /// session (world:anyone ALL, no data), sent back to back in bursts of a thousand: a long
    /// queue in seconds. They go when this client is dropped. Returns how many were created.
    pub fn create_sequential_burst(&self, prefix: &str, count: usize) -> usize {
        const BURST: usize = 1000;
        let mut created = 0;
        while created < count {
            let n = BURST.min(count - created);
            let requests: Vec<(i32, Vec<u8>)> = (0..n)
                .map(|_| {
                    let body = Out::default().create(prefix, FLAG_EPHEMERAL_SEQUENTIAL);
                    (OP_CREATE, body.0)
                })
                .collect();
            for reply in self.call(&requests) {
                if reply.err != OK {
                    panic!(
                        "raw client: creating {prefix}<sequence>: {}",
                        code_name(reply.err)
                    );
                }
            }
            created += n;
        }
        created
    }

    /// Creates the persistent node `path` (no data) whose ACL gives world:anyone only `perms`
    /// (bits READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16), e.g. a parent that lets anyone
    /// create below it but not list it; its parent must exist.
    pub fn create_persistent_for_anyone(&self, path: &str, perms: i32) {
        let body = Out::default().create_for_anyone(path, 0, perms);
        let reply = self.call_one(OP_CREATE, body);
        if reply.err != OK {
            panic!(
                "raw client: creating persistent {path} for anyone:{perms}: {}",
                code_name(reply.err)
            );
        }
    }

    /// Sets the ACL of the existing node `path` to world:anyone with only `perms` (bits as
    /// [`create_persistent_for_anyone`](Self::create_persistent_for_anyone)), any version.
    pub fn set_acl_for_anyone(&self, path: &str, perms: i32) {
        let body = Out::default()
            .string(path)
            .int(1)
            .int(perms)
            .string("world")
            .string("anyone")
            .int(-1);
        let reply = self.call_one(OP_SET_ACL, body);
        if reply.err != OK {
            panic!(
                "raw client: setting the ACL of {path} to anyone:{perms}: {}",
                code_name(reply.err)
            );
        }
    }

    /// Creates the ephemeral node `path` (world:anyone ALL, no data) in this session.
    fn create_ephemeral(&self, path: &str) {
        let reply = self.call_one(OP_CREATE, Out::default().create(path, FLAG_EPHEMERAL));
        if reply.err != OK {
            panic!(
                "raw client: creating ephemeral {path}: {}",
                code_name(reply.err)
            );
        }
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(pinger) = self.pinger.take() {
            let _ = pinger.join();
        }
        // Closing the session, rather than letting it time out, removes its ephemeral nodes
        // before the drop returns, which is what a test dropping a holder means. Best effort:
        // a drop must not panic, and the server may be gone.
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        if conn.broken.is_none() {
            let _ = conn.stream.set_read_timeout(Some(CLOSE_TIMEOUT));
            let _ = conn.stream.set_write_timeout(Some(CLOSE_TIMEOUT));
            let _ = conn.exchange(&[(OP_CLOSE_SESSION, Vec::new())]);
        }
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// A raw ephemeral node owned by a session of its own (for "parent is ephemeral" tests); the
/// node goes when this is dropped.
pub struct RawEphemeral {
    _client: RawClient,
}

/// Creates the ephemeral node `path` in a new raw session, its parent (and the parent's
/// ancestors) as open containers first.
pub fn create_ephemeral(path: &str) -> RawEphemeral {
    let client = RawClient::connect(&super::connect_string());
    client.mkdir_open(&path[..path.rfind('/').expect("an absolute path")]);
    client.create_ephemeral(path);
    RawEphemeral { _client: client }
}

/// What a server answers a session that never authenticated: the error code of the reply to
/// one `exists("/")` sent right after the handshake, and whether the server then closed the
/// connection (read as end of stream or a reset within the I/O timeout). Used to tell a server
/// that enforces authentication from a client that let a session through.
pub fn unauthenticated_exists(host: &str) -> (i32, bool) {
    let (mut stream, _) = RawClient::handshake(host)
        .unwrap_or_else(|e| panic!("raw client: no session with {host}: {e}"));
    let request = Out::default()
        .int(1) // xid
        .int(OP_EXISTS)
        .string("/")
        .bool(false); // watch
    stream
        .write_all(&frame(&request.0))
        .unwrap_or_else(|e| panic!("raw client: exists to {host}: {e}"));
    let reply =
        read_frame(&mut stream).unwrap_or_else(|e| panic!("raw client: no reply from {host}: {e}"));
    let mut reply = In(&reply);
    let _xid = reply.int("xid");
    let _zxid = reply.long("zxid");
    let err = reply.int("err");
    // A server that goes on serving would answer nothing more: wait a little, not forever.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(3)));
    let mut byte = [0; 1];
    let closed = match stream.read(&mut byte) {
        Ok(0) => true,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
        ),
        Ok(_) => false,
    };
    (err, closed)
}
