//! What each request does, with ZooKeeper's checks in ZooKeeper's order
//! (`PrepRequestProcessor` for writes, `FinalRequestProcessor` for reads): the dispatch, the
//! session's own requests (ping, auth, close), and what the writes share (the transaction,
//! the changes whose watches fire). The writes are in `writes` and `multi`, the reads in
//! `reads`, the watches a change or a reconnection fires in `watch_events`.

use std::collections::HashSet;
use std::sync::Arc;

use zklock_proto::{code, op, xid, Acl, AuthPacket, Id, Request, Response, SetWatches2};

use super::tree::Node;
use super::{acl, err, ConnId, Model, Now, Out};

/// The reply to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The header's xid.
    pub xid: i32,
    /// The header's zxid.
    pub zxid: i64,
    /// The header's error code.
    pub err: i32,
    /// The body.
    pub body: Response,
    /// Close the connection once the reply is sent.
    pub close: bool,
}

/// A change whose watches fire when its transaction commits.
#[derive(Debug)]
pub(crate) struct Change {
    pub(super) kind: i32,
    pub(super) path: String,
    pub(super) zxid: i64,
    pub(super) acl: Vec<Acl>,
}

/// Who asks: the session and its connection's identities.
pub(super) struct Caller {
    pub(super) session: i64,
    pub(super) auth: Arc<Vec<Id>>,
}

/// The state of one write transaction: its zxid and time, what it will fire, and for a multi
/// the nodes as they were before it (to roll back).
pub(super) struct Txn {
    pub(super) zxid: i64,
    pub(super) time: i64,
    pub(super) changes: Vec<Change>,
    pub(super) undo: Option<Undo>,
}

/// The nodes a multi touched as they were before it, each saved once.
pub(super) type Undo = (Vec<(String, Option<Node>)>, HashSet<String>);

impl Txn {
    pub(super) fn save(&mut self, model: &Model, path: &str) {
        if let Some((undo, seen)) = &mut self.undo {
            if seen.insert(path.to_owned()) {
                undo.push((path.to_owned(), model.tree.get(path).cloned()));
            }
        }
    }
}

pub(super) fn version_ok(current: i32, expected: i32) -> Result<(), i32> {
    if expected != -1 && expected != current {
        return err(code::BAD_VERSION);
    }
    Ok(())
}

impl Model {
    /// Applies one request from connection `conn`. Effects on other connections (and the
    /// caller's own notifications, which precede the reply) are appended to `out`.
    pub fn request(
        &mut self,
        conn: ConnId,
        xid: i32,
        req: Request,
        now: Now,
        out: &mut Vec<Out>,
    ) -> Reply {
        self.touch(conn, now);
        let reply = |zxid, err, body| Reply {
            xid,
            zxid,
            err,
            body,
            close: false,
        };
        let Some(c) = self.conns.get(&conn) else {
            return Reply {
                close: true,
                ..reply(self.zxid, code::SESSION_EXPIRED, Response::Empty)
            };
        };
        let caller = Caller {
            session: c.session,
            auth: c.auth.clone(),
        };
        if !self.sessions.contains_key(&caller.session) {
            return Reply {
                close: true,
                ..reply(self.zxid, code::SESSION_EXPIRED, Response::Empty)
            };
        }
        match req {
            Request::Ping => Reply {
                xid: xid::PING,
                ..reply(self.zxid, 0, Response::Empty)
            },
            Request::Auth(p) => self.auth(conn, xid, p),
            Request::CloseSession => {
                if let Some(s) = self.sessions.get_mut(&caller.session) {
                    s.conn = None;
                }
                self.close_session(caller.session, now, out);
                self.drop_conn(conn);
                Reply {
                    close: true,
                    ..reply(self.zxid, 0, Response::Empty)
                }
            }
            // Not a request of its own in ZooKeeper (only inside a multi): its
            // UnimplementedRequestProcessor answers and closes the connection.
            Request::Check(_) => Reply {
                close: true,
                ..reply(-1, code::UNIMPLEMENTED, Response::Empty)
            },
            Request::Create(_)
            | Request::Create2(_)
            | Request::CreateContainer(_)
            | Request::CreateTtl(_)
            | Request::Delete(_)
            | Request::DeleteContainer(_)
            | Request::SetData(_)
            | Request::SetAcl(_)
            | Request::Multi(_)
            | Request::Reconfig(_) => {
                self.counters.updates += 1;
                let (e, body) = self.write(&caller, req, now, out);
                reply(self.zxid, e, body)
            }
            Request::SetWatches(w) => {
                let w = SetWatches2 {
                    relative_zxid: w.relative_zxid,
                    data_watches: w.data_watches,
                    exist_watches: w.exist_watches,
                    child_watches: w.child_watches,
                    persistent_watches: Vec::new(),
                    persistent_recursive_watches: Vec::new(),
                };
                self.set_watches(conn, w, out);
                reply(self.zxid, 0, Response::Empty)
            }
            Request::SetWatches2(w) => {
                self.set_watches(conn, w, out);
                reply(self.zxid, 0, Response::Empty)
            }
            other => {
                self.counters.reads += 1;
                match self.read(conn, &caller, other) {
                    Ok(body) => reply(self.zxid, 0, body),
                    Err(e) => reply(self.zxid, e, Response::Empty),
                }
            }
        }
    }

    /// The answer to a request whose header decoded and whose body did not: ZooKeeper answers
    /// MarshallingError and keeps the connection; a multi's uses up a zxid, as its prep takes one
    /// before reading the ops.
    pub fn undecodable(&mut self, conn: ConnId, xid: i32, opc: i32, now: Now) -> Reply {
        self.touch(conn, now);
        if opc == op::MULTI {
            self.next_zxid();
        }
        Reply {
            xid,
            zxid: self.zxid,
            err: code::MARSHALLING_ERROR,
            body: Response::Empty,
            close: false,
        }
    }

    /// `addAuth`: digest only (ZooKeeper's default providers are digest and ip, and ip takes
    /// its identity from the socket). Anything else fails and closes the connection.
    fn auth(&mut self, conn: ConnId, xid: i32, p: AuthPacket) -> Reply {
        let mut reply = Reply {
            xid,
            zxid: 0,
            err: 0,
            body: Response::Empty,
            close: false,
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return reply;
        };
        if p.scheme == "digest" {
            let creds = String::from_utf8_lossy(&p.auth).into_owned();
            let id = acl::digest(&creds);
            if self.cfg.super_digest.as_deref() == Some(id.as_str()) {
                push_unique(
                    Arc::make_mut(&mut c.auth),
                    Id {
                        scheme: "super".into(),
                        id: String::new(),
                    },
                );
            }
            push_unique(
                Arc::make_mut(&mut c.auth),
                Id {
                    scheme: "digest".into(),
                    id,
                },
            );
        } else if p.scheme == "ip" {
            let id = Id {
                scheme: "ip".into(),
                id: c.ip.clone(),
            };
            push_unique(Arc::make_mut(&mut c.auth), id);
        } else {
            log::warn!("no authentication provider for scheme {}", p.scheme);
            reply.err = code::AUTH_FAILED;
            reply.close = true;
        }
        reply
    }
}

fn push_unique(ids: &mut Vec<Id>, id: Id) {
    if !ids.contains(&id) {
        ids.push(id);
    }
}

impl Change {
    pub(crate) fn new(kind: i32, path: String, zxid: i64, acl: Vec<Acl>) -> Change {
        Change {
            kind,
            path,
            zxid,
            acl,
        }
    }
}
