//! Establishing a session on one connection: dialling a host (through TLS where configured),
//! the connect request and its answer, then authentication, all before the attempt's deadline.

use std::io;
use std::time::Instant;

use super::config::Config;
use crate::wire::attempt::{read_frame, AttemptError};
use crate::wire::hosts::{Host, Rotation};
use crate::wire::jute::{Malformed, Reader, Writer};
use crate::wire::link::{self, Frames, Link};
use crate::wire::proto::{op, xid, ConnectRequest, ConnectResponse, ReplyHeader, MAX_FRAME};

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
        return crate::wire::tls::connect(tls, &host.name, stream, deadline)
            .map_err(AttemptError::Tls);
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
        crate::wire::sasl::authenticate(
            &mut link,
            &mut frames,
            user,
            password,
            &_host_name(config),
            deadline,
        )?;
    }
    // The handshake's frames are small; from now on a reply over the session's limit fails its
    // request alone.
    frames.skip_oversized(config.max_reply);
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
