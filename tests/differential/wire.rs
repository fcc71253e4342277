//! One raw session of the differential test, encoded and decoded with zklock-proto's records
//! (the one codec the server is built on, so that the test compares semantics, not two
//! hand-written encodings). One request at a time: every notification read before a reply is
//! kept, in order, with that reply.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use zklock_proto::{
    op, xid, AuthPacket, ConnectRequest, ConnectResponse, Reader, Record, ReplyHeader, Request,
    Response, WatcherEvent, Writer,
};

/// The bound on every read and write: a server that does not answer fails the sequence.
const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a server has to close a connection it means to close.
const CLOSE_WAIT: Duration = Duration::from_millis(1500);
/// The session timeout asked for: sequences last well under a second, and nothing pings.
pub const SESSION_TIMEOUT_MS: i32 = 10_000;

/// A notification as received: the zxid of its header, and the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub zxid: i64,
    pub event: WatcherEvent,
}

/// A reply: its header and decoded body, and the notifications read before it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub header: ReplyHeader,
    pub body: Response,
    pub events: Vec<Event>,
}

/// An open session.
pub struct Session {
    stream: TcpStream,
    next_xid: i32,
    pub id: i64,
    pub connected: ConnectResponse,
    /// The highest zxid a reply's header showed, as a client tracks it for a reconnect.
    pub last_zxid: i64,
}

fn io_err(what: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(what.to_string())
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(0..=16 << 20).contains(&len) {
        return Err(io_err(format!("frame length {len}")));
    }
    let mut body = vec![0; len as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

impl Session {
    /// A new session on `addr` (`host:port`).
    pub fn connect(addr: &str) -> std::io::Result<Session> {
        Self::handshake(addr, 0, vec![0; 16], 0)
    }

    /// This session on a new connection to `addr`: ZooKeeper moves it there (and closes the
    /// old connection). The answer's timeout is 0 if the server refused.
    pub fn reconnect(&self, addr: &str) -> std::io::Result<Session> {
        Self::handshake(addr, self.id, self.connected.passwd.clone(), self.last_zxid)
    }

    fn handshake(
        addr: &str,
        session_id: i64,
        passwd: Vec<u8>,
        last_zxid_seen: i64,
    ) -> std::io::Result<Session> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen,
            timeout: SESSION_TIMEOUT_MS,
            session_id,
            passwd,
            read_only: Some(false),
        };
        let mut w = Writer::frame();
        w.record(&request);
        stream.write_all(&w.finish())?;
        let body = read_frame(&mut stream)?;
        let connected = ConnectResponse::from_bytes(&body).map_err(io_err)?;
        if connected.timeout <= 0 && session_id == 0 {
            return Err(io_err("session refused (timeout 0)"));
        }
        Ok(Session {
            stream,
            next_xid: 1,
            id: connected.session_id,
            connected,
            last_zxid: last_zxid_seen,
        })
    }

    /// Sends `request` and reads until its reply.
    pub fn call(&mut self, request: &Request) -> std::io::Result<Reply> {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.stream.write_all(&request.to_frame(xid))?;
        self.read_until(xid, request.op())
    }

    /// After an Unimplemented answer: whether the server closes the connection within
    /// [`CLOSE_WAIT`] (ZooKeeper 3.9 does), with any notifications read meanwhile. The session
    /// is not to be used again either way.
    pub fn closed_after(&mut self) -> (bool, Vec<Event>) {
        let _ = self.stream.set_read_timeout(Some(CLOSE_WAIT));
        let mut events = Vec::new();
        loop {
            match read_frame(&mut self.stream) {
                Ok(frame) => {
                    let mut r = Reader::new(&frame);
                    let header: Result<ReplyHeader, _> = r.record();
                    match (header, r.record::<WatcherEvent>()) {
                        (Ok(h), Ok(event)) if h.xid == xid::NOTIFICATION => {
                            events.push(Event {
                                zxid: h.zxid,
                                event,
                            });
                        }
                        _ => return (false, events),
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return (false, events)
                }
                Err(_) => return (true, events),
            }
        }
    }

    /// `addAuth`: the auth packet goes with its special xid, and so does its reply.
    pub fn add_auth(&mut self, scheme: &str, auth: &[u8]) -> std::io::Result<Reply> {
        let mut w = Writer::frame();
        w.int(xid::AUTH).int(op::AUTH).record(&AuthPacket {
            kind: 0,
            scheme: scheme.to_owned(),
            auth: auth.to_vec(),
        });
        self.stream.write_all(&w.finish())?;
        self.read_until(xid::AUTH, op::AUTH)
    }

    /// `setWatches2`, sent as a client re-arms its watches on a new connection (its own xid).
    pub fn set_watches(&mut self, request: &zklock_proto::SetWatches2) -> std::io::Result<Reply> {
        let mut w = Writer::frame();
        w.int(xid::SET_WATCHES)
            .int(op::SET_WATCHES2)
            .record(request);
        self.stream.write_all(&w.finish())?;
        self.read_until(xid::SET_WATCHES, op::SET_WATCHES2)
    }

    /// A ping, to collect the notifications already queued for this session.
    pub fn ping(&mut self) -> std::io::Result<Reply> {
        let mut w = Writer::frame();
        w.int(xid::PING).int(op::PING);
        self.stream.write_all(&w.finish())?;
        self.read_until(xid::PING, op::PING)
    }

    fn read_until(&mut self, want: i32, code: i32) -> std::io::Result<Reply> {
        let mut events = Vec::new();
        loop {
            let frame = read_frame(&mut self.stream)?;
            let mut r = Reader::new(&frame);
            let header: ReplyHeader = r.record().map_err(io_err)?;
            if header.xid == xid::NOTIFICATION {
                let event: WatcherEvent = r.record().map_err(io_err)?;
                events.push(Event {
                    zxid: header.zxid,
                    event,
                });
                continue;
            }
            if header.xid != want {
                return Err(io_err(format!(
                    "reply xid {} while waiting for {want}",
                    header.xid
                )));
            }
            let body = Response::decode(code, header.err, &mut r)
                .map_err(|e| io_err(format!("op {code}: {e}")))?;
            self.last_zxid = self.last_zxid.max(header.zxid);
            return Ok(Reply {
                header,
                body,
                events,
            });
        }
    }
}
