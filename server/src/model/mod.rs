//! ZooKeeper's semantics in one model: the data tree, sessions and their expiry, the watch
//! manager, ACLs, and what each request does to them. It has no clock and no sockets: every
//! call takes `now` ([`Now`]), and what must reach a connection other than the caller's comes
//! back as [`Out`] effects, in the order ZooKeeper would deliver them. The server drives it with
//! the real clock; zklock's deterministic simulation drives it with a virtual one. Given the same
//! calls, it answers the same way every time (no hash map's order reaches an answer).

mod acl;
mod children;
mod multi;
mod ops;
mod reads;
mod snapshot;
mod tree;
mod watch_events;
mod watches;
mod writes;

use std::collections::BTreeMap;
use std::sync::Arc;

use zklock_proto::{code, event_type, ConnectRequest, ConnectResponse, Id, WatcherEvent};

use tree::{Kind, Tree};
use watches::WatchTable;

pub use ops::Reply;

/// A connection, numbered by whoever drives the model.
pub type ConnId = u64;

/// A new session's handshake with `timeout` ms, for the crate's tests.
#[cfg(test)]
pub(crate) fn test_hello(timeout: i32) -> ConnectRequest {
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout,
        session_id: 0,
        passwd: vec![0; 16],
        read_only: None,
    }
}

/// A moment: the monotonic clock for timeouts, the wall clock for node times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Monotonic milliseconds (any origin).
    pub mono_ms: u64,
    /// Milliseconds since the Unix epoch (ctime, mtime).
    pub wall_ms: i64,
}

/// An effect on a connection that the driver carries out, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Send a watch notification (xid -1, `zxid` in the header).
    Notify {
        /// The watching connection.
        conn: ConnId,
        /// The zxid of the change (-1 for setWatches' catch-up events).
        zxid: i64,
        /// The event.
        event: WatcherEvent,
    },
    /// Close the connection without a word (its session expired, closed, or moved).
    Close {
        /// The connection.
        conn: ConnId,
    },
}

/// The model's settings.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The tick, ms (sessions expire on tick boundaries).
    pub tick_ms: u64,
    /// The smallest session timeout granted, ms.
    pub min_session_timeout_ms: i32,
    /// The largest session timeout granted, ms.
    pub max_session_timeout_ms: i32,
    /// TTL nodes allowed (`zookeeper.extendedTypesEnabled`); off, `createTTL` is
    /// Unimplemented, as in ZooKeeper by default.
    pub extended_types: bool,
    /// A super user's digest id (`user:base64(sha1(user:password))`), as ZooKeeper's
    /// `zookeeper.DigestAuthenticationProvider.superDigest`.
    pub super_digest: Option<String>,
    /// How long a container that never had a child lives, ms; 0 = forever
    /// (`znode.container.maxNeverUsedIntervalMs`).
    pub container_max_never_used_ms: u64,
}

/// A session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) timeout_ms: i32,
    pub(crate) expires_at: u64,
    pub(crate) conn: Option<ConnId>,
    pub(crate) passwd: [u8; 16],
}

/// A connection that completed its handshake.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub(crate) session: i64,
    /// Shared with each request's caller (a reference, not a copy per request).
    pub(crate) auth: Arc<Vec<Id>>,
    pub(crate) ip: String,
    pub(crate) packets: u64,
}

/// The answer to a handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connected {
    /// Send this response; if `valid` is false (an unknown or expired session) close the
    /// connection after it.
    Reply {
        /// The connect response.
        response: ConnectResponse,
        /// Whether the session is usable.
        valid: bool,
    },
    /// Close without a reply: the client has seen a zxid this server has not.
    Refuse,
}

/// ZooKeeper's semantics (see the module docs).
#[derive(Debug)]
pub struct Model {
    pub(crate) cfg: ModelConfig,
    pub(crate) tree: Tree,
    pub(crate) data_watches: WatchTable,
    pub(crate) child_watches: WatchTable,
    /// Ordered maps: one history gives one order of expiries and listings, and a lookup by id
    /// costs less than hashing it.
    pub(crate) sessions: BTreeMap<i64, Session>,
    pub(crate) conns: BTreeMap<ConnId, Conn>,
    pub(crate) zxid: i64,
    pub(crate) counters: Counters,
    next_session: i64,
    secret: u64,
    started_ms: u64,
}

impl Model {
    /// An empty tree (`/` and `/zookeeper` as a fresh server has them), no sessions.
    pub fn new(cfg: ModelConfig, now: Now) -> Model {
        // ZooKeeper's first session id: the time in the high bits, server id 0.
        let next_session = ((now.wall_ms << 24) as u64 >> 8) as i64;
        let secret =
            splitmix(now.wall_ms as u64 ^ 0x005e_ed0f_2c0c_c0de ^ std::process::id() as u64);
        Model {
            cfg,
            tree: Tree::new(),
            data_watches: WatchTable::default(),
            child_watches: WatchTable::default(),
            sessions: BTreeMap::new(),
            conns: BTreeMap::new(),
            zxid: 0,
            counters: Counters::default(),
            next_session: next_session.max(1),
            secret,
            started_ms: now.mono_ms,
        }
    }

    /// What the session ids and passwords are drawn from, for a log that must rebuild them.
    pub fn seeds(&self) -> (i64, u64) {
        (self.next_session, self.secret)
    }

    /// Sets [`seeds`](Self::seeds), before anything is replayed.
    pub fn set_seeds(&mut self, next_session: i64, secret: u64) {
        self.next_session = next_session;
        self.secret = secret;
    }

    /// The last zxid applied.
    pub fn last_zxid(&self) -> i64 {
        self.zxid
    }

    pub(crate) fn next_zxid(&mut self) -> i64 {
        self.zxid += 1;
        self.zxid
    }

    fn passwd(&self, session: i64) -> [u8; 16] {
        let a = splitmix(session as u64 ^ self.secret);
        let b = splitmix(a);
        let mut p = [0; 16];
        p[..8].copy_from_slice(&a.to_be_bytes());
        p[8..].copy_from_slice(&b.to_be_bytes());
        p
    }

    fn expiry(&self, now: Now, timeout_ms: i32) -> u64 {
        // SessionTrackerImpl's buckets: the next tick boundary after now + timeout.
        let tick = self.cfg.tick_ms.max(1);
        let t = now.mono_ms.saturating_sub(self.started_ms) + timeout_ms.max(0) as u64;
        self.started_ms + (t / tick + 1) * tick
    }

    /// A handshake on connection `conn` from `ip` (`ZooKeeperServer.processConnectRequest`).
    /// A session resumed on a new connection closes its old one without a word (in `out`),
    /// before its password is checked, as ZooKeeper does.
    pub fn connect(
        &mut self,
        conn: ConnId,
        ip: &str,
        req: &ConnectRequest,
        now: Now,
        out: &mut Vec<Out>,
    ) -> Connected {
        if req.last_zxid_seen > self.zxid {
            log::info!(
                "refusing session 0x{:x}: the client has seen zxid 0x{:x}, ours is 0x{:x}",
                req.session_id,
                req.last_zxid_seen,
                self.zxid
            );
            return Connected::Refuse;
        }
        let timeout = req.timeout.clamp(
            self.cfg.min_session_timeout_ms,
            self.cfg.max_session_timeout_ms,
        );
        // The read-only flag is echoed only if the client sent it (ZooKeeper 3.9.3+).
        let read_only = req.read_only.map(|_| false);
        let session_id = if req.session_id == 0 {
            let id = self.next_session;
            self.next_session += 1;
            // createSession is a transaction: it uses up a zxid.
            self.next_zxid();
            self.sessions.insert(
                id,
                Session {
                    timeout_ms: timeout,
                    expires_at: self.expiry(now, timeout),
                    conn: Some(conn),
                    passwd: self.passwd(id),
                },
            );
            log::debug!("session 0x{id:x} created, timeout {timeout} ms");
            id
        } else {
            let id = req.session_id;
            let old = self.sessions.get(&id).and_then(|s| s.conn);
            if let Some(old) = old.filter(|old| *old != conn) {
                self.drop_conn(old);
                out.push(Out::Close { conn: old });
            }
            let expiry = self.expiry(now, timeout);
            let ok = match self.sessions.get_mut(&id) {
                Some(s) if s.passwd[..] == req.passwd[..] => {
                    s.timeout_ms = timeout;
                    s.expires_at = expiry;
                    s.conn = Some(conn);
                    true
                }
                _ => false,
            };
            if !ok {
                log::info!("session 0x{id:x} unknown, expired or with a wrong password");
                return Connected::Reply {
                    response: ConnectResponse {
                        protocol_version: 0,
                        timeout: 0,
                        session_id: 0,
                        passwd: vec![0; 16],
                        read_only,
                    },
                    valid: false,
                };
            }
            log::debug!("session 0x{id:x} resumed on connection {conn}");
            id
        };
        self.conns.insert(
            conn,
            Conn {
                session: session_id,
                auth: Arc::new(vec![Id {
                    scheme: "ip".into(),
                    id: ip.to_owned(),
                }]),
                ip: ip.to_owned(),
                packets: 0,
            },
        );
        Connected::Reply {
            response: ConnectResponse {
                protocol_version: 0,
                timeout,
                session_id,
                passwd: self.passwd(session_id).to_vec(),
                read_only,
            },
            valid: true,
        }
    }

    /// A connection is gone (closed by either side): its watches go with it; its session
    /// stays until it expires or the client resumes it elsewhere.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.drop_conn(conn);
    }

    fn drop_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            if let Some(s) = self.sessions.get_mut(&c.session) {
                if s.conn == Some(conn) {
                    s.conn = None;
                }
            }
        }
        self.data_watches.remove_conn(conn);
        self.child_watches.remove_conn(conn);
    }

    /// Expires every session whose time is up: its ephemerals are deleted (one transaction),
    /// watches fire, its connection is closed.
    pub fn expire_sessions(&mut self, now: Now, out: &mut Vec<Out>) {
        let due: Vec<i64> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.expires_at <= now.mono_ms)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            log::info!("session 0x{id:x} expired");
            self.close_session(id, now, out);
        }
    }

    /// Ends a session now (a closeSession request or its expiry): ephemerals deleted in one
    /// transaction, watches fired, the session's connection closed.
    pub fn close_session(&mut self, id: i64, now: Now, out: &mut Vec<Out>) {
        let Some(session) = self.sessions.remove(&id) else {
            return;
        };
        let zxid = self.next_zxid();
        let paths: Vec<String> = self
            .tree
            .ephemerals
            .get(&id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for path in paths {
            let mut changes = Vec::new();
            self.delete_node(&path, zxid, &mut changes);
            self.fire(changes, out);
        }
        let _ = now;
        if let Some(conn) = session.conn {
            self.drop_conn(conn);
            out.push(Out::Close { conn });
        }
    }

    /// An operator's delete of `path` (as a super user's `delete -1`): no ACL or version check,
    /// a transaction of its own, watches fired as for any delete. `Err` with ZooKeeper's code:
    /// `NoNode`, `NotEmpty`, or `BadArguments` for `/`, `/zookeeper` and what is below it.
    pub fn operator_delete(&mut self, path: &str, out: &mut Vec<Out>) -> Result<(), i32> {
        if path == "/" || !tree::valid_path(path) || tree::special(path) {
            return err(code::BAD_ARGUMENTS);
        }
        let Some(node) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        if !node.children.is_empty() {
            return err(code::NOT_EMPTY);
        }
        let zxid = self.next_zxid();
        let mut changes = Vec::new();
        self.delete_node(path, zxid, &mut changes);
        self.fire(changes, out);
        Ok(())
    }

    /// A restart: every connection is gone (with its watches). Keeping, the tree, the zxid and
    /// the sessions stay, each session's timeout starting again from `now`, as ZooKeeper's
    /// session tracker does for the sessions it loads from a snapshot; otherwise the tree and
    /// the sessions start empty and only the zxid goes on.
    pub fn restart(&mut self, keep: bool, now: Now) {
        if keep {
            let conns: Vec<ConnId> = self.conns.keys().copied().collect();
            for conn in conns {
                self.drop_conn(conn);
            }
            let ids: Vec<i64> = self.sessions.keys().copied().collect();
            for id in ids {
                let timeout = self.sessions[&id].timeout_ms;
                let expires_at = self.expiry(now, timeout);
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.conn = None;
                    s.expires_at = expires_at;
                }
            }
        } else {
            let zxid = self.zxid;
            let next_session = self.next_session;
            // The same secret: a log replayed in another process must draw the same passwords.
            let secret = self.secret;
            *self = Model::new(self.cfg.clone(), now);
            self.secret = secret;
            self.zxid = zxid;
            self.next_session = self.next_session.max(next_session);
        }
    }

    /// Gives back the memory a burst of nodes, sessions or watches left behind (the driver calls
    /// it now and then: the maps never shrink by themselves).
    pub fn compact(&mut self) {
        watches::shrink(&mut self.tree.nodes);
        watches::shrink(&mut self.tree.ephemerals);
        self.data_watches.compact();
        self.child_watches.compact();
    }

    /// The live sessions' ids.
    pub fn session_ids(&self) -> Vec<i64> {
        self.sessions.keys().copied().collect()
    }

    /// When the next session is due to expire (monotonic ms), for the driver's timer.
    pub fn next_expiry(&self) -> Option<u64> {
        self.sessions.values().map(|s| s.expires_at).min()
    }

    /// When session `id` is due to expire (monotonic ms); `None` once it has ended (expired or
    /// closed) or if it never existed. For a driver that follows sessions one by one.
    pub fn session_expiry(&self, id: i64) -> Option<u64> {
        self.sessions.get(&id).map(|s| s.expires_at)
    }

    /// Sets the stored child counter of `path` (the cversion its sequential children are
    /// numbered from), as if that many children had been created: how a test reaches the
    /// counter's limit, 2^31-1, without two billion creates. `false` if there is no such node.
    pub fn set_cversion(&mut self, path: &str, cversion: i32) -> bool {
        match self.tree.get_mut(path) {
            Some(node) => {
                node.cversion = cversion;
                true
            }
            None => false,
        }
    }

    /// Renews a connection's session (every packet does, as in ZooKeeper).
    pub(crate) fn touch(&mut self, conn: ConnId, now: Now) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.packets += 1;
        let id = c.session;
        if let Some(s) = self.sessions.get(&id) {
            let e = self.expiry(now, s.timeout_ms);
            if let Some(s) = self.sessions.get_mut(&id) {
                s.expires_at = e;
            }
        }
    }

    /// The container sweep (`ContainerManager`): empty containers that ever had a child, and
    /// expired TTL nodes without children, each deleted in a transaction of its own.
    pub fn sweep_containers(&mut self, now: Now, out: &mut Vec<Out>) {
        let mut candidates = Vec::new();
        for path in &self.tree.containers {
            if let Some(n) = self.tree.get(path) {
                if n.children.is_empty()
                    && (n.cversion > 0
                        || (self.cfg.container_max_never_used_ms != 0
                            && now.wall_ms - n.mtime > self.cfg.container_max_never_used_ms as i64))
                {
                    candidates.push(path.clone());
                }
            }
        }
        for path in &self.tree.ttls {
            if let Some(n) = self.tree.get(path) {
                if let Kind::Ttl(ttl) = tree::kind_of(n.owner) {
                    if n.children.is_empty() && ttl != 0 && now.wall_ms - n.mtime > ttl {
                        candidates.push(path.clone());
                    }
                }
            }
        }
        for path in candidates {
            let zxid = self.next_zxid();
            log::debug!("container sweep deletes {path}");
            let mut changes = Vec::new();
            self.delete_node(&path, zxid, &mut changes);
            self.fire(changes, out);
        }
    }

    /// Deletes a node (no checks), recording what it fires: NodeDeleted on the node (its data
    /// and child watches), then NodeChildrenChanged on its parent.
    pub(crate) fn delete_node(&mut self, path: &str, zxid: i64, changes: &mut Vec<ops::Change>) {
        let Some(node) = self.tree.remove(path, zxid) else {
            return;
        };
        let parent = tree::parent_of(path).to_owned();
        let parent_acl = self
            .tree
            .get(&parent)
            .map(|n| n.acl.clone())
            .unwrap_or_default();
        changes.push(ops::Change::new(
            event_type::NODE_DELETED,
            path.to_owned(),
            zxid,
            node.acl,
        ));
        changes.push(ops::Change::new(
            event_type::NODE_CHILDREN_CHANGED,
            parent,
            zxid,
            parent_acl,
        ));
    }

    /// Figures for the four-letter words.
    pub fn stats(&self) -> Stats {
        let mut ephemerals = 0;
        for s in self.tree.ephemerals.values() {
            ephemerals += s.len();
        }
        Stats {
            zxid: self.zxid,
            nodes: self.tree.nodes.len(),
            watches: self.data_watches.count() + self.child_watches.count(),
            watched_paths: self
                .data_watches
                .paths()
                .chain(self.child_watches.paths())
                .map(|(p, _)| p.as_str())
                .collect::<std::collections::HashSet<_>>()
                .len(),
            sessions: self.sessions.len(),
            ephemerals,
            data_size: self.tree.data_size(),
            counters: self.counters,
        }
    }

    /// `wchc`: each connection's session and watched paths.
    pub fn watches_by_session(&self) -> BTreeMap<i64, Vec<String>> {
        let mut out: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for (conn, c) in &self.conns {
            let mut paths: Vec<String> = self
                .data_watches
                .conn_paths(*conn)
                .chain(self.child_watches.conn_paths(*conn))
                .cloned()
                .collect();
            paths.sort();
            paths.dedup();
            if !paths.is_empty() {
                out.entry(c.session).or_default().extend(paths);
            }
        }
        out
    }

    /// `dump`: each session's ephemerals, and its timeout.
    pub fn sessions_dump(&self) -> BTreeMap<i64, (i32, Vec<String>)> {
        self.sessions
            .iter()
            .map(|(id, s)| {
                let eph = self
                    .tree
                    .ephemerals
                    .get(id)
                    .map(|e| e.iter().cloned().collect())
                    .unwrap_or_default();
                (*id, (s.timeout_ms, eph))
            })
            .collect()
    }

    /// The session and packet count of a connection (`cons`).
    pub fn conn_info(&self, conn: ConnId) -> Option<(i64, i32, u64)> {
        let c = self.conns.get(&conn)?;
        let timeout = self.sessions.get(&c.session).map_or(0, |s| s.timeout_ms);
        Some((c.session, timeout, c.packets))
    }
}

/// Figures of the model (for `mntr`, `srvr`, `stat`).
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// The last zxid.
    pub zxid: i64,
    /// Nodes, including `/` and `/zookeeper`'s.
    pub nodes: usize,
    /// Watches, counted per path and connection.
    pub watches: usize,
    /// Distinct watched paths.
    pub watched_paths: usize,
    /// Live sessions.
    pub sessions: usize,
    /// Ephemeral nodes.
    pub ephemerals: usize,
    /// Bytes of paths and data.
    pub data_size: usize,
    /// Requests and notifications counted since start.
    pub counters: Counters,
}

/// Counts since start, as `mntr` reports them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Read requests answered (`zk_cnt_readlatency`).
    pub reads: u64,
    /// Write requests answered, failed ones included (`zk_cnt_updatelatency`).
    pub updates: u64,
    /// Watches fired by kind: created, deleted, data changed, children changed
    /// (`zk_sum_node_*_watch_count`).
    pub fired: [u64; 4],
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

pub(crate) fn err<T>(c: i32) -> Result<T, i32> {
    debug_assert!(c != code::OK);
    Err(c)
}

/// The digest scheme's id of `user:password` (`user:base64(sha1(user:password))`), as ZooKeeper's
/// `DigestAuthenticationProvider.generateDigest`.
pub fn digest(credentials: &str) -> String {
    acl::digest(credentials)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zklock_proto::{create_mode, perms, Acl, CreateRequest, Request, Response};

    fn config() -> ModelConfig {
        ModelConfig {
            tick_ms: 1,
            min_session_timeout_ms: 1,
            max_session_timeout_ms: 60_000,
            extended_types: false,
            super_digest: None,
            container_max_never_used_ms: 0,
        }
    }

    fn at(ms: u64) -> Now {
        Now {
            mono_ms: ms,
            wall_ms: ms as i64,
        }
    }

    #[test]
    fn a_session_s_expiry_and_a_set_counter_as_a_driver_sees_them() {
        let mut m = Model::new(config(), at(0));
        let mut out = Vec::new();
        let hello = super::test_hello(100);
        let Connected::Reply { response, .. } = m.connect(1, "127.0.0.1", &hello, at(0), &mut out)
        else {
            panic!("refused");
        };
        let id = response.session_id;
        assert_eq!(m.session_expiry(id), Some(101));
        assert!(m.set_cversion("/", i32::MAX));
        assert!(!m.set_cversion("/missing", 1));
        let create = |path: &str| {
            Request::Create2(CreateRequest {
                path: path.into(),
                data: Vec::new(),
                acl: vec![Acl::new(perms::ALL, "world", "anyone")],
                flags: create_mode::PERSISTENT_SEQUENTIAL,
            })
        };
        // At its limit the counter stays: the same name twice, the second a NodeExists.
        let first = m.request(1, 1, create("/n-"), at(10), &mut out);
        let Response::Create2(r) = first.body else {
            panic!("{first:?}");
        };
        assert_eq!(r.path, "/n-2147483647");
        let second = m.request(1, 2, create("/n-"), at(10), &mut out);
        assert_eq!(second.err, code::NODE_EXISTS);
        m.expire_sessions(at(111), &mut out);
        assert_eq!(m.session_expiry(id), None);
        assert_eq!(out, vec![Out::Close { conn: 1 }]);
    }
}
