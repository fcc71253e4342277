//! Faults at a test's command: each is something a real ZooKeeper server, its host or its
//! network does (a session expired, a connection closed or reset, a server or a connection gone
//! silent, slow replies, an operator's delete, a restart), made on the server itself rather than
//! faked between client and server.

use std::fmt;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use zklock_proto::code;

use crate::model::ConnId;
use crate::net::{Outbox, Server};

/// A live connection, as [`Server::connections`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Connection {
    /// The server's number for it, for [`Server::close_connection`] and the others.
    pub id: u64,
    /// The session it carries (a client's `session_id()`).
    pub session_id: i64,
    /// The client's address.
    pub peer: SocketAddr,
}

/// Why [`Server::delete_node`] deleted nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeleteError {
    /// No node at that path.
    NoNode,
    /// The node has children.
    NotEmpty,
    /// `/`, `/zookeeper` and what is below it, or a path that is not valid.
    BadPath,
    /// The data directory could not record the delete (the server's log says why).
    NotRecorded,
}

impl fmt::Display for DeleteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeleteError::NoNode => "no node at that path",
            DeleteError::NotEmpty => "the node has children",
            DeleteError::BadPath => "not a path an operator can delete",
            DeleteError::NotRecorded => "the data directory could not record it",
        })
    }
}

impl std::error::Error for DeleteError {}

impl Server {
    /// Expires a session now, as its timeout would: its ephemerals are deleted in one
    /// transaction, the watches that fires are delivered, and its connection is closed (the
    /// client then reconnects and is told its session expired). `false` if no such session
    /// lives, or if the data directory could not record its end (nothing is done then).
    pub fn expire_session(&self, session_id: i64) -> bool {
        let mut shared = self.inner.shared.lock();
        if !shared.model.session_ids().contains(&session_id) {
            return false;
        }
        let now = self.inner.now();
        let mut out = Vec::new();
        if shared
            .record(|j, m| j.close_session(m, session_id, now))
            .is_err()
        {
            return false;
        }
        log::info!("session 0x{session_id:x} expired on request");
        shared.model.close_session(session_id, now, &mut out);
        self.inner.apply(&mut shared, out);
        true
    }

    /// Expires every live session now (see [`expire_session`](Self::expire_session)); returns
    /// how many.
    pub fn expire_all_sessions(&self) -> usize {
        let ids = self.sessions();
        ids.iter().filter(|id| self.expire_session(**id)).count()
    }

    /// Runs the container sweep now (otherwise it runs every `container_check_interval`):
    /// empty containers that once had a child, and expired TTL nodes, are deleted. Nothing is,
    /// if the data directory cannot record the sweep.
    pub fn sweep_containers(&self) {
        let mut shared = self.inner.shared.lock();
        let now = self.inner.now();
        let mut out = Vec::new();
        if shared.record(|j, m| j.sweep(m, now)).is_err() {
            return;
        }
        shared.model.sweep_containers(now, &mut out);
        self.inner.apply(&mut shared, out);
    }

    /// An operator's delete of the node at `path`, as a ZooKeeper admin's `delete` (a super
    /// user, any version): a transaction of its own, the node's data and child watches and its
    /// parent's child watches fire, the parent's pzxid moves. A lock holder whose node this is
    /// has lost its lock.
    ///
    /// # Errors
    /// [`DeleteError`]: no such node, a node with children, or a reserved path.
    pub fn delete_node(&self, path: &str) -> Result<(), DeleteError> {
        let mut shared = self.inner.shared.lock();
        let mut out = Vec::new();
        // Recorded first, refused or not: a refused one replays as refused.
        if shared.record(|j, m| j.delete(m, path)).is_err() {
            return Err(DeleteError::NotRecorded);
        }
        match shared.model.operator_delete(path, &mut out) {
            Ok(()) => {
                log::info!("{path} deleted by the operator");
                self.inner.apply(&mut shared, out);
                Ok(())
            }
            Err(c) if c == code::NO_NODE => Err(DeleteError::NoNode),
            Err(c) if c == code::NOT_EMPTY => Err(DeleteError::NotEmpty),
            Err(_) => Err(DeleteError::BadPath),
        }
    }

    /// The connections whose handshake is done, by id.
    pub fn connections(&self) -> Vec<Connection> {
        let shared = self.inner.shared.lock();
        let mut list: Vec<Connection> = shared
            .outboxes
            .iter()
            .filter_map(|(id, ob)| {
                let (session_id, _, _) = shared.model.conn_info(*id)?;
                Some(Connection {
                    id: *id,
                    session_id,
                    peer: ob.peer,
                })
            })
            .collect();
        list.sort_by_key(|c| c.id);
        list
    }

    /// Closes a connection as the server does (a FIN); its session lives on, and the client
    /// resumes it on a new connection. `false` if no such connection.
    pub fn close_connection(&self, id: u64) -> bool {
        self.end_connection(id, false)
    }

    /// Resets a connection (an RST: `SO_LINGER` 0, then close), as a crashed host or a
    /// middlebox does; its session lives on. `false` if no such connection.
    pub fn reset_connection(&self, id: u64) -> bool {
        self.end_connection(id, true)
    }

    /// Closes every connection (FIN); returns how many.
    pub fn close_all_connections(&self) -> usize {
        let ids: Vec<u64> = self.connections().iter().map(|c| c.id).collect();
        ids.iter()
            .filter(|id| self.end_connection(**id, false))
            .count()
    }

    /// Resets every connection (RST); returns how many.
    pub fn reset_all_connections(&self) -> usize {
        let ids: Vec<u64> = self.connections().iter().map(|c| c.id).collect();
        ids.iter()
            .filter(|id| self.end_connection(**id, true))
            .count()
    }

    /// Silences the whole server, or lets it speak again: while silent it accepts connections
    /// and reads what they send, but processes nothing (pings included, so no session is
    /// renewed) and sends nothing, as a server that stopped running (a long GC pause, a
    /// `SIGSTOP`). Sessions still expire on its clock meanwhile. Speaking again, it processes
    /// what it read, in order, and sends what it held.
    pub fn set_silent(&self, silent: bool) {
        log::info!("server {}", if silent { "silent" } else { "speaking" });
        self.inner.faults.silent.store(silent, Ordering::SeqCst);
    }

    /// Silences one session, or lets it speak again, as [`set_silent`](Self::set_silent) does
    /// for all (a network partition between that client and the server): its connection, and
    /// any new one that asks to resume it, is read but not answered, so the session is not
    /// renewed and expires in time, and nothing is sent to it. Returns whether it was silent.
    pub fn set_session_silent(&self, session_id: i64, silent: bool) -> bool {
        log::info!(
            "session 0x{session_id:x} {}",
            if silent { "silent" } else { "speaking" }
        );
        let mut set = self.inner.faults.silent_sessions.lock();
        if silent {
            !set.insert(session_id)
        } else {
            set.remove(&session_id)
        }
    }

    /// Delays every frame sent from now on (replies and notifications) by `delay`, in order, as
    /// a slow server or link; `Duration::ZERO` ends the delay. The request applies when it
    /// arrives: only its reply is late.
    pub fn set_reply_delay(&self, delay: Duration) {
        self.inner
            .faults
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Restarts the server on the same port: every connection is closed, silence and delays
    /// end. With `keep_data`, the tree, the zxid and the sessions stay, as ZooKeeper restores
    /// them from its snapshot and log: each session's timeout starts again, and a client that
    /// reconnects within it resumes its session (its ephemerals, so its locks, intact).
    /// Without, the tree and the sessions are wiped: a reconnecting client is told its session
    /// expired (the zxid goes on, so the server does not refuse clients that saw later ones).
    pub fn restart(&self, keep_data: bool) {
        log::info!(
            "restarting on 127.0.0.1:{}, {}",
            self.inner.port,
            if keep_data {
                "keeping the data and sessions"
            } else {
                "wiped"
            }
        );
        {
            let mut shared = self.inner.shared.lock();
            for (_, ob) in shared.outboxes.drain() {
                ob.close();
            }
            self.inner.faults.silent.store(false, Ordering::SeqCst);
            self.inner.faults.silent_sessions.lock().clear();
            self.inner.faults.delay_ms.store(0, Ordering::SeqCst);
            let now = self.inner.now();
            let recorded = shared.record(|j, m| j.restart(m, keep_data, now)).is_ok();
            shared.model.restart(keep_data, now);
            if !recorded {
                // A restart cannot be refused: the state after it is written whole instead.
                if let Err(e) = shared.record(|j, m| j.snapshot_now(m)) {
                    log::error!("the data directory no longer matches the server's state: {e}");
                }
            }
            self.inner.timer_wake.notify_all();
        }
        for s in self.inner.sockets.lock().values() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn end_connection(&self, id: ConnId, reset: bool) -> bool {
        // Unlisted at once: a request it is in the middle of is dropped, as on a closed socket.
        let Some(ob) = self.inner.shared.lock().outboxes.remove(&id) else {
            return false;
        };
        let sock = self
            .inner
            .sockets
            .lock()
            .get(&id)
            .and_then(|s| s.try_clone().ok());
        log::info!(
            "connection {id} {} on request",
            if reset { "reset" } else { "closed" }
        );
        end(&ob, sock, reset);
        true
    }
}

fn end(ob: &Arc<Outbox>, sock: Option<TcpStream>, reset: bool) {
    if reset {
        ob.reset.store(true, Ordering::SeqCst);
        if let Some(s) = &sock {
            linger_zero(s);
            // Ends the reader's read without a FIN; the RST leaves when the last handle closes.
            let _ = s.shutdown(Shutdown::Read);
        }
    } else if let Some(s) = &sock {
        let _ = s.shutdown(Shutdown::Both);
    }
    ob.close();
}

#[cfg(unix)]
fn linger_zero(s: &TcpStream) {
    use nix::sys::socket::{setsockopt, sockopt::Linger};
    let off = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    if let Err(e) = setsockopt(s, Linger, &off) {
        log::warn!("SO_LINGER 0: {e}");
    }
}

#[cfg(not(unix))]
fn linger_zero(_: &TcpStream) {}

/// What the admin word, `zkfa` followed by a command line, answers: the binary's
/// `zklock-server admin --port P COMMAND` sends it on the server's own port, as the
/// four-letter words are.
pub(crate) const ADMIN_WORD: &[u8; 4] = b"zkfa";

/// Runs one admin command on the server behind `inner`: the same faults as the handles.
pub(crate) fn admin(inner: &Arc<crate::net::Inner>, line: &str) -> String {
    // A view of the running server: it owns no thread, so dropping it stops nothing.
    let server = Server::view(inner.clone());
    let words: Vec<&str> = line.split_whitespace().collect();
    let id = |s: Option<&&str>| -> Option<i64> {
        let s = s?;
        match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok().map(|v| v as i64),
            None => s.parse().ok(),
        }
    };
    let on = |s: Option<&&str>| -> Option<bool> {
        match *s? {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }
    };
    let done = |ok: bool| {
        if ok {
            "ok\n".to_owned()
        } else {
            "error: no such session or connection\n".to_owned()
        }
    };
    match (words.first().copied(), words.len()) {
        (Some("sessions"), 1) => server
            .sessions()
            .iter()
            .map(|s| format!("0x{s:x}\n"))
            .collect(),
        (Some("connections"), 1) => server
            .connections()
            .iter()
            .map(|c| format!("{} 0x{:x} {}\n", c.id, c.session_id, c.peer))
            .collect(),
        (Some("expire-session"), 2) => match id(words.get(1)) {
            Some(s) => done(server.expire_session(s)),
            None => "error: a session id, as 0x... or decimal\n".into(),
        },
        (Some("expire-all-sessions"), 1) => format!("ok {}\n", server.expire_all_sessions()),
        (Some(w @ ("close-connection" | "reset-connection")), 2) => match id(words.get(1)) {
            Some(c) if w == "close-connection" => done(server.close_connection(c as u64)),
            Some(c) => done(server.reset_connection(c as u64)),
            None => "error: a connection id\n".into(),
        },
        (Some("close-all-connections"), 1) => format!("ok {}\n", server.close_all_connections()),
        (Some("reset-all-connections"), 1) => format!("ok {}\n", server.reset_all_connections()),
        (Some("silent"), 2) => match on(words.get(1)) {
            Some(b) => {
                server.set_silent(b);
                "ok\n".into()
            }
            None => "error: silent on|off\n".into(),
        },
        (Some("silent-session"), 3) => match (id(words.get(1)), on(words.get(2))) {
            (Some(s), Some(b)) => {
                server.set_session_silent(s, b);
                "ok\n".into()
            }
            _ => "error: silent-session ID on|off\n".into(),
        },
        (Some("delay"), 2) => match words[1].parse::<u64>() {
            Ok(ms) => {
                server.set_reply_delay(Duration::from_millis(ms));
                "ok\n".into()
            }
            Err(_) => "error: delay MS\n".into(),
        },
        (Some("delete"), 2) => match server.delete_node(words[1]) {
            Ok(()) => "ok\n".into(),
            Err(e) => format!("error: {e}\n"),
        },
        (Some("restart"), 2) if matches!(words[1], "keep" | "wipe") => {
            server.restart(words[1] == "keep");
            "ok\n".into()
        }
        (Some("sweep"), 1) => {
            server.sweep_containers();
            "ok\n".into()
        }
        _ => format!("error: unknown command {line:?}; one of: {ADMIN_COMMANDS}\n"),
    }
}

/// The admin commands, for the usage line.
pub(crate) const ADMIN_COMMANDS: &str = "sessions, connections, expire-session ID, \
expire-all-sessions, close-connection ID, reset-connection ID, close-all-connections, \
reset-all-connections, silent on|off, silent-session ID on|off, delay MS, delete PATH, \
restart keep|wipe, sweep";
