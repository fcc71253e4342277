//! The model's durable state as bytes, and back: the tree (stats, ACLs, children in their
//! listing order), the sessions, the connections and their identities, the zxid and what
//! session ids and passwords are drawn from. What a log replayed after it needs to give the
//! same answers; the watches are not kept (they fire, they change nothing else).

use std::collections::{BTreeMap, HashMap};

use zklock_proto::{Acl, DecodeError, Decoded, Id, Reader, Writer};

use super::children::Children;
use super::tree::{self, Node, Tree};
use super::{Conn, Model, Session};

const FORMAT: i32 = 1;

fn malformed<T>(what: String) -> Decoded<T> {
    Err(DecodeError::Malformed(what))
}

impl Model {
    /// The durable state as bytes (see [`load_snapshot`](Self::load_snapshot)).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new();
        let (next_session, secret) = self.seeds();
        w.int(FORMAT)
            .long(self.zxid)
            .long(next_session)
            .long(secret as i64);
        let mut paths: Vec<&String> = self.tree.nodes.keys().collect();
        paths.sort_unstable();
        w.int(paths.len() as i32);
        for path in paths {
            let n = &self.tree.nodes[path];
            w.string(path).buffer(&n.data).int(n.acl.len() as i32);
            for a in &n.acl {
                w.record(a);
            }
            w.long(n.czxid)
                .long(n.mzxid)
                .long(n.ctime)
                .long(n.mtime)
                .int(n.version)
                .int(n.cversion)
                .int(n.aversion)
                .long(n.owner)
                .long(n.pzxid);
            let (names, cap) = n.children.parts();
            w.int(cap as i32).strings(&names);
        }
        let mut ids: Vec<&i64> = self.sessions.keys().collect();
        ids.sort_unstable();
        w.int(ids.len() as i32);
        for id in ids {
            let s = &self.sessions[id];
            w.long(*id)
                .int(s.timeout_ms)
                .long(s.expires_at as i64)
                .buffer(&s.passwd)
                .long(s.conn.map_or(-1, |c| c as i64));
        }
        let mut conns: Vec<&u64> = self.conns.keys().collect();
        conns.sort_unstable();
        w.int(conns.len() as i32);
        for id in conns {
            let c = &self.conns[id];
            w.long(*id as i64)
                .long(c.session)
                .string(&c.ip)
                .long(c.packets as i64)
                .int(c.auth.len() as i32);
            for a in c.auth.iter() {
                w.record(a);
            }
        }
        w.into_inner()
    }

    /// Replaces the state with a [`snapshot`](Self::snapshot)'s; the watches are dropped.
    /// Each session's expiry is the snapshot's until the driver restarts the model.
    ///
    /// # Errors
    /// Bytes that are not a snapshot of this format, or a tree without its root or with a node
    /// whose parent is missing. The model is unchanged then.
    pub fn load_snapshot(&mut self, bytes: &[u8]) -> Decoded<()> {
        let mut r = Reader::new(bytes);
        let format = r.int()?;
        if format != FORMAT {
            return malformed(format!("snapshot format {format}, not {FORMAT}"));
        }
        let zxid = r.long()?;
        let next_session = r.long()?;
        let secret = r.long()? as u64;
        let count = r.count(4 + 4 + 4 + 8 * 4 + 4 * 3 + 8 * 2 + 4 + 4)?;
        let mut nodes = HashMap::with_capacity(count);
        for _ in 0..count {
            let path = r.string()?;
            let data = r.buffer()?.to_vec();
            let acl: Vec<Acl> = r.records(12)?;
            let mut n = Node::new(data, acl, 0, 0, 0);
            n.czxid = r.long()?;
            n.mzxid = r.long()?;
            n.ctime = r.long()?;
            n.mtime = r.long()?;
            n.version = r.int()?;
            n.cversion = r.int()?;
            n.aversion = r.int()?;
            n.owner = r.long()?;
            n.pzxid = r.long()?;
            let cap = r.int()? as u32;
            n.children = Children::from_parts(r.strings()?, cap);
            nodes.insert(path, n);
        }
        if !nodes.contains_key("/") {
            return malformed("snapshot without the root".into());
        }
        for (path, n) in &nodes {
            for child in n.children.names() {
                let p = if path == "/" {
                    format!("/{child}")
                } else {
                    format!("{path}/{child}")
                };
                if !nodes.contains_key(&p) {
                    return malformed(format!("snapshot lists {p}, which it lacks"));
                }
            }
            if path != "/" && !nodes.contains_key(tree::parent_of(path)) {
                return malformed(format!("snapshot has {path} without its parent"));
            }
        }
        let count = r.count(8 + 4 + 8 + 4 + 8)?;
        let mut sessions = BTreeMap::new();
        for _ in 0..count {
            let id = r.long()?;
            let timeout_ms = r.int()?;
            let expires_at = r.long()? as u64;
            let mut passwd = [0; 16];
            let p = r.buffer()?;
            if p.len() != passwd.len() {
                return malformed(format!("session 0x{id:x}: a password of {} bytes", p.len()));
            }
            passwd.copy_from_slice(p);
            let conn = r.long()?;
            sessions.insert(
                id,
                Session {
                    timeout_ms,
                    expires_at,
                    conn: (conn >= 0).then_some(conn as u64),
                    passwd,
                },
            );
        }
        let count = r.count(8 + 8 + 4 + 8 + 4)?;
        let mut conns = BTreeMap::new();
        for _ in 0..count {
            let id = r.long()? as u64;
            let session = r.long()?;
            let ip = r.string()?;
            let packets = r.long()? as u64;
            let auth: Vec<Id> = r.records(8)?;
            conns.insert(
                id,
                Conn {
                    session,
                    auth: std::sync::Arc::new(auth),
                    ip,
                    packets,
                },
            );
        }
        self.tree = Tree::from_nodes(nodes);
        self.sessions = sessions;
        self.conns = conns;
        self.zxid = zxid;
        self.set_seeds(next_session, secret);
        self.data_watches = Default::default();
        self.child_watches = Default::default();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use zklock_proto::{create_mode, CreateRequest, PathWatchRequest, Request, Response};

    use super::*;
    use crate::model::{ModelConfig, Now};

    fn cfg() -> ModelConfig {
        ModelConfig {
            tick_ms: 100,
            min_session_timeout_ms: 200,
            max_session_timeout_ms: 2000,
            extended_types: true,
            super_digest: None,
            container_max_never_used_ms: 0,
        }
    }

    #[test]
    fn a_loaded_snapshot_answers_as_the_model_it_was_taken_of() {
        let now = Now {
            mono_ms: 0,
            wall_ms: 1_000,
        };
        let mut a = Model::new(cfg(), now);
        let mut out = Vec::new();
        let hello = crate::model::test_hello(1000);
        let _ = a.connect(7, "127.0.0.1", &hello, now, &mut out);
        let create = |path: &str, flags| {
            Request::Create2(CreateRequest {
                path: path.into(),
                data: path.as_bytes().to_vec(),
                acl: Acl::open(),
                flags,
            })
        };
        for (i, (path, flags)) in [
            ("/p", create_mode::PERSISTENT),
            ("/p/s-", create_mode::PERSISTENT_SEQUENTIAL),
            ("/p/s-", create_mode::PERSISTENT_SEQUENTIAL),
            ("/p/e", create_mode::EPHEMERAL),
            ("/c", create_mode::CONTAINER),
        ]
        .into_iter()
        .enumerate()
        {
            let req = if flags == create_mode::CONTAINER {
                let Request::Create2(r) = create(path, flags) else {
                    unreachable!()
                };
                Request::CreateContainer(r)
            } else {
                create(path, flags)
            };
            assert_eq!(a.request(7, i as i32, req, now, &mut out).err, 0);
        }
        let mut b = Model::new(cfg(), now);
        b.load_snapshot(&a.snapshot()).unwrap();
        assert_eq!(b.snapshot(), a.snapshot(), "the same state, byte for byte");
        assert_eq!(b.last_zxid(), a.last_zxid());
        assert_eq!(b.sessions_dump(), a.sessions_dump());
        // The same next answers, on the connection the snapshot kept.
        let ask = || {
            Request::GetChildren2(PathWatchRequest {
                path: "/p".into(),
                watch: false,
            })
        };
        let ra = a.request(7, 9, ask(), now, &mut out);
        let rb = b.request(7, 9, ask(), now, &mut out);
        assert_eq!(ra, rb);
        let Response::GetChildren2(c) = &rb.body else {
            panic!("{rb:?}")
        };
        assert_eq!(c.children.len(), 3);
        let next = |m: &mut Model| m.request(7, 10, create("/p/s-", 2), now, &mut Vec::new());
        assert_eq!(next(&mut a), next(&mut b), "sequence numbers go on alike");
        // A session ended after the load takes its ephemeral with it.
        let id = b.session_ids()[0];
        b.close_session(id, now, &mut out);
        assert!(b.tree.get("/p/e").is_none());
        assert!(Model::new(cfg(), now).load_snapshot(b"junk").is_err());
    }
}
