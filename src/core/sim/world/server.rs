//! The server: each simulated request written as zklock-proto's record and applied by
//! zklock-server's [`Model`](zklock_server::model::Model) at the virtual time, its answer read
//! back into the simulation's reply, and the model's effects (notifications, a connection
//! closed) carried to the connections they are for.

use zklock_proto::{
    code, create_mode, event_type, perms, Acl, CreateRequest, DeleteRequest, PathRequest,
    PathWatchRequest, Request, Response, SetDataRequest, Stat, WatchesRequest,
};
use zklock_server::model::{ConnId, Now, Out};

use super::requests::Msg;
use super::{at, WatchKind, World, OPERATOR};
use crate::wire as zk;

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Persistent,
    Ephemeral,
    Container,
}

/// A request, as the simulated clients send it.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `path` is the full name (the parent's path, `/`, the name or its prefix).
    Create {
        path: String,
        mode: Mode,
        sequential: bool,
    },
    Delete {
        path: String,
    },
    /// getChildren2, optionally watching the children.
    Children {
        path: String,
        watch: bool,
    },
    /// getData, optionally watching the node (no watch is left if it does not exist).
    GetData {
        path: String,
        watch: bool,
    },
    Sync,
    SetData {
        path: String,
    },
}

impl Op {
    /// Whether the leader processes it (a write or a sync), so that its answer renews the
    /// lease (see `session/lease.rs`).
    pub(super) fn by_leader(&self) -> bool {
        matches!(
            self,
            Op::Create { .. } | Op::Delete { .. } | Op::Sync | Op::SetData { .. }
        )
    }

    pub(super) fn label(&self) -> &'static str {
        match self {
            Op::Create { .. } => "create",
            Op::Delete { .. } => "delete",
            Op::Children { .. } => "children",
            Op::GetData { .. } => "get",
            Op::Sync => "sync",
            Op::SetData { .. } => "set",
        }
    }

    /// The request as zklock's session writes it.
    fn record(&self) -> Request {
        match self {
            Op::Create {
                path,
                mode,
                sequential,
            } => {
                let flags = match (mode, sequential) {
                    (Mode::Container, _) => create_mode::CONTAINER,
                    (Mode::Persistent, false) => create_mode::PERSISTENT,
                    (Mode::Persistent, true) => create_mode::PERSISTENT_SEQUENTIAL,
                    (Mode::Ephemeral, false) => create_mode::EPHEMERAL,
                    (Mode::Ephemeral, true) => create_mode::EPHEMERAL_SEQUENTIAL,
                };
                let create = CreateRequest {
                    path: path.clone(),
                    data: Vec::new(),
                    acl: vec![Acl::new(perms::ALL, "world", "anyone")],
                    flags,
                };
                if *mode == Mode::Container {
                    Request::CreateContainer(create)
                } else {
                    Request::Create2(create)
                }
            }
            Op::Delete { path } => Request::Delete(DeleteRequest {
                path: path.clone(),
                version: -1,
            }),
            Op::Children { path, watch } => Request::GetChildren2(PathWatchRequest {
                path: path.clone(),
                watch: *watch,
            }),
            Op::GetData { path, watch } => Request::GetData(PathWatchRequest {
                path: path.clone(),
                watch: *watch,
            }),
            Op::Sync => Request::Sync(PathRequest { path: "/".into() }),
            Op::SetData { path } => Request::SetData(SetDataRequest {
                path: path.clone(),
                data: Vec::new(),
                version: -1,
            }),
        }
    }
}

/// ZooKeeper's error codes that the simulated calls can end with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZkErr {
    NoNode,
    NodeExists,
    NotEmpty,
    /// No answer: the connection was lost with the request in flight (applied or not).
    ConnectionLoss,
    /// The session has ended.
    SessionExpired,
    /// Any other code (none of the simulated requests should get one).
    Other(i32),
}

impl ZkErr {
    fn from_code(c: i32) -> ZkErr {
        match c {
            code::NO_NODE => ZkErr::NoNode,
            code::NODE_EXISTS => ZkErr::NodeExists,
            code::NOT_EMPTY => ZkErr::NotEmpty,
            code::SESSION_EXPIRED => ZkErr::SessionExpired,
            other => ZkErr::Other(other),
        }
    }
}

/// A server's answer (its watch: the client's registration, when the request set one).
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    Created {
        path: String,
        stat: Stat,
    },
    Children {
        names: Vec<String>,
        stat: Stat,
        watch: Option<u64>,
    },
    Data {
        stat: Stat,
        watch: Option<u64>,
    },
    Done,
}

impl World {
    pub(super) fn model_now(&self) -> Now {
        at(self.now)
    }

    /// Sends `request` on `conn`, as received now; the effects are carried out, the caller's
    /// own notifications (which precede its reply) included.
    pub(super) fn request(
        &mut self,
        conn: ConnId,
        request: Request,
    ) -> zklock_server::model::Reply {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        let mut out = Vec::new();
        let now = self.model_now();
        let reply = self.model.request(conn, xid, request, now, &mut out);
        self.carry_out(out);
        reply
    }

    /// Applies `op` for session `id`, as the server answers it on the session's connection.
    pub(super) fn apply(&mut self, id: i64, op: &Op) -> Result<Reply, ZkErr> {
        if self.server_ended(id) {
            return Err(ZkErr::SessionExpired);
        }
        let conn = self.session(id).conn;
        let reply = self.request(conn, op.record());
        if reply.err != code::OK {
            return Err(ZkErr::from_code(reply.err));
        }
        let watch = |world: &mut World, kind| {
            let path = match op {
                Op::Children { path, watch: true } | Op::GetData { path, watch: true } => path,
                _ => return None,
            };
            Some(world.register(id, kind, path))
        };
        Ok(match reply.body {
            Response::Create2(r) => {
                let mut stat = r.stat;
                if let Some(owner) = self.reported_owner {
                    stat.ephemeral_owner = owner;
                }
                if self.stale_owner.remove(&id) {
                    // A stale reply (a lagging follower's view of another node by that name).
                    stat.ephemeral_owner = OPERATOR;
                }
                Reply::Created { path: r.path, stat }
            }
            Response::GetChildren2(r) => {
                let mut names = r.children;
                if self.shuffle {
                    for i in (1..names.len()).rev() {
                        let j = self.rng.below(i + 1);
                        names.swap(i, j);
                    }
                }
                let watch = watch(self, WatchKind::Child);
                Reply::Children {
                    names,
                    stat: r.stat,
                    watch,
                }
            }
            Response::GetData(r) => {
                if let Op::GetData { path, watch: true } = op {
                    self.session_mut(id).watched.push(path.clone());
                }
                let watch = watch(self, WatchKind::Data);
                Reply::Data {
                    stat: r.stat,
                    watch,
                }
            }
            Response::Stat(r) => Reply::Data {
                stat: r.stat,
                watch: None,
            },
            _ => Reply::Done,
        })
    }

    /// Carries out the model's effects: a notification goes on its connection's way back (the
    /// operator's are read at once), a closed connection is dropped.
    pub(super) fn carry_out(&mut self, out: Vec<Out>) {
        for effect in out {
            match effect {
                Out::Notify { conn, zxid, event } if conn == self.operator_conn => {
                    self.observe(event.kind, event.path, zxid);
                }
                Out::Notify { conn, event, .. } => {
                    let Some(&id) = self.conns.get(&conn) else {
                        continue;
                    };
                    let kind = match event.kind {
                        event_type::NODE_CREATED => zk::EventType::NodeCreated,
                        event_type::NODE_DELETED => zk::EventType::NodeDeleted,
                        event_type::NODE_DATA_CHANGED => zk::EventType::NodeDataChanged,
                        event_type::NODE_CHILDREN_CHANGED => zk::EventType::NodeChildrenChanged,
                        _ => continue,
                    };
                    self.session_mut(id).inbox.push_back(Msg::Event {
                        path: event.path,
                        event: kind,
                    });
                }
                Out::Close { conn } => {
                    let Some(id) = self.conns.remove(&conn) else {
                        continue;
                    };
                    // A frozen process's connection is dropped once it resumes.
                    if self.session(id).frozen_until.is_none() {
                        self.drop_link(id);
                    }
                }
            }
        }
    }

    /// A change seen by the operator's watch on the whole tree: a node's czxid is the zxid of
    /// its creation; its deletion is recorded against it.
    fn observe(&mut self, kind: i32, path: String, zxid: i64) {
        match kind {
            event_type::NODE_CREATED => {
                self.live.insert(path, zxid);
            }
            event_type::NODE_DELETED => {
                if let Some(czxid) = self.live.remove(&path) {
                    self.note(|| format!("server: {path} deleted at zxid {zxid}"));
                    self.removed.insert(czxid, zxid);
                }
            }
            _ => {}
        }
    }

    /// The czxid of the node at `path`, if there is one.
    pub(crate) fn czxid(&self, path: &str) -> Option<i64> {
        self.live.get(path).copied()
    }

    /// Removes session `id`'s watch of `kind` on `path` at the server, if its connection
    /// carries the request (a connection that went silent drops it with the watch later).
    pub(super) fn remove_server_watch(&mut self, id: i64, kind: WatchKind, path: &str) {
        if !self.flows(id) || self.server_ended(id) {
            return;
        }
        let conn = self.session(id).conn;
        let kind = match kind {
            WatchKind::Data => zklock_proto::watcher_type::DATA,
            WatchKind::Child => zklock_proto::watcher_type::CHILDREN,
        };
        let _ = self.request(
            conn,
            Request::RemoveWatches(WatchesRequest {
                path: path.to_owned(),
                kind,
            }),
        );
    }
}
