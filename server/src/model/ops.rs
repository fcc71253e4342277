//! What each request does, with ZooKeeper's checks in ZooKeeper's order
//! (`PrepRequestProcessor` for writes, `FinalRequestProcessor` for reads).

use std::collections::HashSet;
use std::sync::Arc;

use zklock_proto::{
    add_watch_mode, code, create_mode, event_type, op, perms, watcher_type, xid, Acl, AuthPacket,
    ClientInfo, Create2Response, CreateRequest, CreateResponse, ErrorResponse, GetAclResponse,
    GetAllChildrenNumberResponse, GetChildren2Response, GetChildrenResponse, GetDataResponse,
    GetEphemeralsResponse, Id, MultiOp, MultiResponse, OpResult, PathRequest, Request, Response,
    SetWatches2, Stat, StatResponse, WatcherEvent, WhoAmIResponse,
};

use super::tree::{self, Kind, Node};
use super::watches::Mode;
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
    kind: i32,
    path: String,
    zxid: i64,
    acl: Vec<Acl>,
}

/// Who asks: the session and its connection's identities.
struct Caller {
    session: i64,
    auth: Arc<Vec<Id>>,
}

/// The state of one write transaction: its zxid and time, what it will fire, and for a multi
/// the nodes as they were before it (to roll back).
struct Txn {
    zxid: i64,
    time: i64,
    changes: Vec<Change>,
    undo: Option<Undo>,
}

/// The nodes a multi touched as they were before it, each saved once.
type Undo = (Vec<(String, Option<Node>)>, HashSet<String>);

impl Txn {
    fn save(&mut self, model: &Model, path: &str) {
        if let Some((undo, seen)) = &mut self.undo {
            if seen.insert(path.to_owned()) {
                undo.push((path.to_owned(), model.tree.get(path).cloned()));
            }
        }
    }
}

fn version_ok(current: i32, expected: i32) -> Result<(), i32> {
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

    fn write(
        &mut self,
        caller: &Caller,
        req: Request,
        now: Now,
        out: &mut Vec<Out>,
    ) -> (i32, Response) {
        // Every write uses up a zxid, failed or not (an error transaction is logged too).
        let mut txn = Txn {
            zxid: self.next_zxid(),
            time: now.wall_ms,
            changes: Vec::new(),
            undo: None,
        };
        let result = match req {
            Request::Multi(ops) => {
                let r = self.multi(caller, ops, &mut txn);
                return match r {
                    Ok(results) => {
                        self.fire(txn.changes, out);
                        (0, Response::Multi(MultiResponse { results }))
                    }
                    Err(e) => (e, Response::Empty),
                };
            }
            Request::Reconfig(_) => err(code::RECONFIG_DISABLED),
            Request::Create(r) => self
                .create(caller, op::CREATE, &r, -1, &mut txn)
                .map(|(path, _)| Response::Create(CreateResponse { path })),
            Request::Create2(r) => self.create2(caller, op::CREATE2, &r, -1, &mut txn),
            Request::CreateContainer(r) => {
                self.create2(caller, op::CREATE_CONTAINER, &r, -1, &mut txn)
            }
            Request::CreateTtl(r) => {
                let c = CreateRequest {
                    path: r.path,
                    data: r.data,
                    acl: r.acl,
                    flags: r.flags,
                };
                self.create2(caller, op::CREATE_TTL, &c, r.ttl, &mut txn)
            }
            Request::Delete(r) => self
                .delete(caller, &r.path, r.version, &mut txn)
                .map(|()| Response::Empty),
            Request::DeleteContainer(r) => self
                .delete_container(&r.path, &mut txn)
                .map(|()| Response::Empty),
            Request::SetData(r) => self
                .set_data(caller, &r.path, r.data, r.version, &mut txn)
                .map(|stat| Response::Stat(StatResponse { stat })),
            Request::SetAcl(r) => self
                .set_acl(caller, &r.path, &r.acl, r.version, &mut txn)
                .map(|stat| Response::Stat(StatResponse { stat })),
            _ => err(code::UNIMPLEMENTED),
        };
        match result {
            Ok(body) => {
                self.fire(txn.changes, out);
                (0, body)
            }
            Err(e) => (e, Response::Empty),
        }
    }

    fn create2(
        &mut self,
        caller: &Caller,
        opc: i32,
        r: &CreateRequest,
        ttl: i64,
        txn: &mut Txn,
    ) -> Result<Response, i32> {
        self.create(caller, opc, r, ttl, txn)
            .map(|(path, stat)| Response::Create2(Create2Response { path, stat }))
    }

    fn create(
        &mut self,
        caller: &Caller,
        opc: i32,
        r: &CreateRequest,
        ttl: i64,
        txn: &mut Txn,
    ) -> Result<(String, Stat), i32> {
        if !(create_mode::PERSISTENT..=create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL)
            .contains(&r.flags)
        {
            return err(code::BAD_ARGUMENTS);
        }
        let is_ttl = matches!(
            r.flags,
            create_mode::PERSISTENT_WITH_TTL | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL
        );
        if is_ttl && !self.cfg.extended_types {
            return err(code::UNIMPLEMENTED);
        }
        if is_ttl && !(ttl > 0 && ttl <= tree::MAX_TTL) || !is_ttl && ttl >= 0 {
            return err(code::BAD_ARGUMENTS);
        }
        let sequential = matches!(
            r.flags,
            create_mode::PERSISTENT_SEQUENTIAL
                | create_mode::EPHEMERAL_SEQUENTIAL
                | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL
        );
        let ephemeral = matches!(
            r.flags,
            create_mode::EPHEMERAL | create_mode::EPHEMERAL_SEQUENTIAL
        );
        let Some(slash) = r.path.rfind('/') else {
            return err(code::BAD_ARGUMENTS);
        };
        if r.path.contains('\0') {
            return err(code::BAD_ARGUMENTS);
        }
        let parent_path = if slash == 0 { "/" } else { &r.path[..slash] };
        let acl = acl::fixup(&r.acl, &caller.auth)?;
        let Some(parent) = self.tree.get(parent_path) else {
            return err(code::NO_NODE);
        };
        if !acl::allowed(&parent.acl, perms::CREATE, &caller.auth) {
            return err(code::NO_AUTH);
        }
        let path = if sequential {
            format!("{}{:010}", r.path, parent.cversion)
        } else {
            r.path.clone()
        };
        if !tree::valid_path(&path) {
            return err(code::BAD_ARGUMENTS);
        }
        if self.tree.get(&path).is_some() {
            return err(code::NODE_EXISTS);
        }
        if matches!(tree::kind_of(parent.owner), Kind::Ephemeral(_)) {
            return err(code::NO_CHILDREN_FOR_EPHEMERALS);
        }
        let parent_acl = parent.acl.clone();
        let owner = if opc == op::CREATE_CONTAINER {
            tree::CONTAINER_OWNER
        } else if is_ttl {
            tree::ttl_owner(ttl)
        } else if ephemeral {
            caller.session
        } else {
            0
        };
        let parent_path = parent_path.to_owned();
        txn.save(self, &parent_path);
        txn.save(self, &path);
        let node = Node::new(r.data.clone(), acl.clone(), txn.zxid, txn.time, owner);
        let stat = node.stat();
        self.tree.insert(&path, node, txn.zxid);
        txn.changes.push(Change {
            kind: event_type::NODE_CREATED,
            path: path.clone(),
            zxid: txn.zxid,
            acl,
        });
        txn.changes.push(Change {
            kind: event_type::NODE_CHILDREN_CHANGED,
            path: parent_path,
            zxid: txn.zxid,
            acl: parent_acl,
        });
        Ok((path, stat))
    }

    fn delete(
        &mut self,
        caller: &Caller,
        path: &str,
        version: i32,
        txn: &mut Txn,
    ) -> Result<(), i32> {
        let Some(slash) = path.rfind('/') else {
            return err(code::BAD_ARGUMENTS);
        };
        if path.contains('\0') || tree::special(path) {
            return err(code::BAD_ARGUMENTS);
        }
        let parent_path = if slash == 0 { "/" } else { &path[..slash] };
        let Some(parent) = self.tree.get(parent_path) else {
            return err(code::NO_NODE);
        };
        if !acl::allowed(&parent.acl, perms::DELETE, &caller.auth) {
            return err(code::NO_AUTH);
        }
        let Some(node) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        version_ok(node.version, version)?;
        if !node.children.is_empty() {
            return err(code::NOT_EMPTY);
        }
        let parent_path = parent_path.to_owned();
        txn.save(self, &parent_path);
        txn.save(self, path);
        self.delete_node(path, txn.zxid, &mut txn.changes);
        Ok(())
    }

    /// `deleteContainer` as `PrepRequestProcessor` takes it from anyone (the container sweep
    /// sends it, and a client may): no ACL or version check; NotEmpty before the node's kind;
    /// and only a node owned by a session is refused (BadVersion), so a plain persistent node
    /// goes as a container does. A TTL node is refused too while TTL nodes are off, since the
    /// owner's TTL bits then read as a session's.
    fn delete_container(&mut self, path: &str, txn: &mut Txn) -> Result<(), i32> {
        let Some(slash) = path.rfind('/') else {
            return err(code::BAD_ARGUMENTS);
        };
        if path.contains('\0') || tree::special(path) {
            return err(code::BAD_ARGUMENTS);
        }
        let Some(node) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        if !node.children.is_empty() {
            return err(code::NOT_EMPTY);
        }
        match tree::kind_of(node.owner) {
            Kind::Ephemeral(_) => return err(code::BAD_VERSION),
            Kind::Ttl(_) if !self.cfg.extended_types => return err(code::BAD_VERSION),
            _ => {}
        }
        let parent_path = if slash == 0 { "/" } else { &path[..slash] }.to_owned();
        txn.save(self, &parent_path);
        txn.save(self, path);
        self.delete_node(path, txn.zxid, &mut txn.changes);
        Ok(())
    }

    fn set_data(
        &mut self,
        caller: &Caller,
        path: &str,
        data: Vec<u8>,
        version: i32,
        txn: &mut Txn,
    ) -> Result<Stat, i32> {
        if !tree::valid_path(path) {
            return err(code::BAD_ARGUMENTS);
        }
        let Some(node) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        if !acl::allowed(&node.acl, perms::WRITE, &caller.auth) {
            return err(code::NO_AUTH);
        }
        version_ok(node.version, version)?;
        txn.save(self, path);
        let node = self.tree.get_mut(path).expect("checked above");
        node.data = data;
        node.version = node.version.wrapping_add(1);
        node.mtime = txn.time;
        node.mzxid = txn.zxid;
        let (stat, acl) = (node.stat(), node.acl.clone());
        txn.changes.push(Change {
            kind: event_type::NODE_DATA_CHANGED,
            path: path.to_owned(),
            zxid: txn.zxid,
            acl,
        });
        Ok(stat)
    }

    fn set_acl(
        &mut self,
        caller: &Caller,
        path: &str,
        new: &[Acl],
        version: i32,
        txn: &mut Txn,
    ) -> Result<Stat, i32> {
        if !tree::valid_path(path) {
            return err(code::BAD_ARGUMENTS);
        }
        let new = acl::fixup(new, &caller.auth)?;
        let Some(node) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        if !acl::allowed(&node.acl, perms::ADMIN, &caller.auth) {
            return err(code::NO_AUTH);
        }
        version_ok(node.aversion, version)?;
        txn.save(self, path);
        let node = self.tree.get_mut(path).expect("checked above");
        node.acl = new;
        node.aversion = node.aversion.wrapping_add(1);
        Ok(node.stat())
    }

    fn check(&mut self, caller: &Caller, path: &str, version: i32) -> Result<Stat, i32> {
        if !tree::valid_path(path) {
            return err(code::BAD_ARGUMENTS);
        }
        let Some(node) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        if !acl::allowed(&node.acl, perms::READ, &caller.auth) {
            return err(code::NO_AUTH);
        }
        version_ok(node.version, version)?;
        Ok(node.stat())
    }

    /// All or nothing: the ops run in order on the tree, and the first failure rolls them all
    /// back. Results: 0 for the ops before the failure, its code, RuntimeInconsistency after.
    fn multi(
        &mut self,
        caller: &Caller,
        ops: Vec<MultiOp>,
        txn: &mut Txn,
    ) -> Result<Vec<OpResult>, i32> {
        if ops
            .iter()
            .any(|o| matches!(o, MultiOp::GetData(_) | MultiOp::GetChildren(_)))
        {
            // ZooKeeper's prep fails on a read in a multi with a marshalling error.
            return err(code::MARSHALLING_ERROR);
        }
        // Its MultiOperationRecord refuses a create with unknown flags the same way.
        if ops.iter().any(|o| match o {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => {
                !(create_mode::PERSISTENT..=create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL)
                    .contains(&r.flags)
            }
            _ => false,
        }) {
            return err(code::MARSHALLING_ERROR);
        }
        txn.undo = Some((Vec::new(), HashSet::new()));
        let mut results = Vec::with_capacity(ops.len());
        let mut failed = None;
        for (i, o) in ops.iter().enumerate() {
            let r = match o {
                MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => {
                    // ZooKeeper's Op.Create takes its op code from the mode when the mode is
                    // TTL or container, whatever the op said.
                    let opc = match r.flags {
                        create_mode::PERSISTENT_WITH_TTL
                        | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL => op::CREATE_TTL,
                        create_mode::CONTAINER => op::CREATE_CONTAINER,
                        _ => o.op(),
                    };
                    self.create(caller, opc, r, -1, txn).map(|(p, s)| {
                        if opc == op::CREATE {
                            OpResult::Create(p)
                        } else {
                            OpResult::Create2(p, s)
                        }
                    })
                }
                MultiOp::CreateTtl(r) => {
                    let c = CreateRequest {
                        path: r.path.clone(),
                        data: r.data.clone(),
                        acl: r.acl.clone(),
                        flags: r.flags,
                    };
                    // Without a TTL mode, ZooKeeper's Op.create makes it a plain create (or a
                    // container's) and forgets the TTL.
                    let (opc, ttl) = match r.flags {
                        create_mode::PERSISTENT_WITH_TTL
                        | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL => (op::CREATE_TTL, r.ttl),
                        create_mode::CONTAINER => (op::CREATE_CONTAINER, -1),
                        _ => (op::CREATE, -1),
                    };
                    self.create(caller, opc, &c, ttl, txn).map(|(p, s)| {
                        if opc == op::CREATE {
                            OpResult::Create(p)
                        } else {
                            OpResult::Create2(p, s)
                        }
                    })
                }
                MultiOp::Delete(r) => self
                    .delete(caller, &r.path, r.version, txn)
                    .map(|()| OpResult::Delete),
                MultiOp::SetData(r) => self
                    .set_data(caller, &r.path, r.data.clone(), r.version, txn)
                    .map(OpResult::SetData),
                MultiOp::Check(r) => self
                    .check(caller, &r.path, r.version)
                    .map(|_| OpResult::Check),
                MultiOp::GetChildren(_) | MultiOp::GetData(_) => err(code::MARSHALLING_ERROR),
            };
            match r {
                Ok(res) => results.push(res),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let Some((at, e)) = failed else {
            txn.undo = None;
            return Ok(results);
        };
        if let Some((undo, _)) = txn.undo.take() {
            for (path, prior) in undo.into_iter().rev() {
                self.tree.restore(&path, prior);
            }
        }
        txn.changes.clear();
        Ok((0..ops.len())
            .map(|i| {
                OpResult::Error(match i.cmp(&at) {
                    std::cmp::Ordering::Less => 0,
                    std::cmp::Ordering::Equal => e,
                    std::cmp::Ordering::Greater => code::RUNTIME_INCONSISTENCY,
                })
            })
            .collect())
    }

    fn read(&mut self, conn: ConnId, caller: &Caller, req: Request) -> Result<Response, i32> {
        let readable = |node: &Node| {
            if acl::allowed(&node.acl, perms::READ, &caller.auth) {
                Ok(())
            } else {
                err(code::NO_AUTH)
            }
        };
        match req {
            Request::Exists(r) => {
                if r.path.contains('\0') {
                    return err(code::BAD_ARGUMENTS);
                }
                // Since 3.9, exists needs READ only on a node that exists.
                if let Some(n) = self.tree.get(&r.path) {
                    readable(n)?;
                }
                if r.watch {
                    self.data_watches.add(&r.path, conn, Mode::Standard);
                }
                match self.tree.get(&r.path) {
                    Some(n) => Ok(Response::Stat(StatResponse { stat: n.stat() })),
                    None => err(code::NO_NODE),
                }
            }
            Request::GetData(r) => {
                let (data, stat) = self.get_data(conn, caller, &r.path, r.watch)?;
                Ok(Response::GetData(GetDataResponse { data, stat }))
            }
            Request::GetChildren(r) => {
                let (children, _) = self.get_children(conn, caller, &r.path, r.watch)?;
                Ok(Response::GetChildren(GetChildrenResponse { children }))
            }
            Request::GetChildren2(r) => {
                let (children, stat) = self.get_children(conn, caller, &r.path, r.watch)?;
                Ok(Response::GetChildren2(GetChildren2Response {
                    children,
                    stat,
                }))
            }
            Request::GetAcl(r) => {
                let Some(n) = self.tree.get(&r.path) else {
                    return err(code::NO_NODE);
                };
                if !acl::allowed(&n.acl, perms::READ | perms::ADMIN, &caller.auth) {
                    return err(code::NO_AUTH);
                }
                let shown = if acl::allowed(&n.acl, perms::ADMIN, &caller.auth) {
                    n.acl.clone()
                } else {
                    acl::masked(&n.acl)
                };
                Ok(Response::GetAcl(GetAclResponse {
                    acl: shown,
                    stat: n.stat(),
                }))
            }
            Request::GetAllChildrenNumber(r) => {
                let Some(n) = self.tree.get(&r.path) else {
                    return err(code::NO_NODE);
                };
                readable(n)?;
                Ok(Response::GetAllChildrenNumber(
                    GetAllChildrenNumberResponse {
                        total_number: self.tree.descendants(&r.path) as i32,
                    },
                ))
            }
            Request::GetEphemerals(r) => {
                let prefix = r.path.trim();
                let ephemerals = self
                    .tree
                    .ephemerals
                    .get(&caller.session)
                    .map(|set| {
                        set.iter()
                            .filter(|p| {
                                prefix.is_empty() || prefix == "/" || p.starts_with(&r.path)
                            })
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Response::GetEphemerals(GetEphemeralsResponse {
                    ephemerals,
                }))
            }
            Request::Sync(r) => Ok(Response::Sync(PathRequest { path: r.path })),
            Request::MultiRead(ops) => {
                let mut results = Vec::with_capacity(ops.len());
                for o in ops {
                    results.push(match o {
                        MultiOp::GetChildren(r) => {
                            match self.get_children(conn, caller, &r.path, r.watch) {
                                Ok((children, _)) => OpResult::GetChildren(children),
                                Err(e) => OpResult::Error(e),
                            }
                        }
                        MultiOp::GetData(r) => {
                            match self.get_data(conn, caller, &r.path, r.watch) {
                                Ok((data, stat)) => OpResult::GetData(data, stat),
                                Err(e) => OpResult::Error(e),
                            }
                        }
                        // ZooKeeper fails the whole request on a write in a multiRead.
                        _ => return err(code::MARSHALLING_ERROR),
                    });
                }
                Ok(Response::Multi(MultiResponse { results }))
            }
            Request::AddWatch(r) => {
                match r.mode {
                    add_watch_mode::PERSISTENT => {
                        self.data_watches.add(&r.path, conn, Mode::Persistent);
                        self.child_watches.add(&r.path, conn, Mode::Persistent);
                    }
                    add_watch_mode::PERSISTENT_RECURSIVE => {
                        self.data_watches.add(&r.path, conn, Mode::Recursive);
                    }
                    _ => return err(code::MARSHALLING_ERROR),
                }
                Ok(Response::AddWatch(ErrorResponse { err: 0 }))
            }
            Request::CheckWatches(r) => {
                let found = match r.kind {
                    watcher_type::CHILDREN => {
                        self.child_watches
                            .contains(&r.path, conn, Some(Mode::Standard))
                    }
                    watcher_type::DATA => {
                        self.data_watches
                            .contains(&r.path, conn, Some(Mode::Standard))
                    }
                    watcher_type::PERSISTENT => {
                        self.data_watches
                            .contains(&r.path, conn, Some(Mode::Persistent))
                    }
                    watcher_type::PERSISTENT_RECURSIVE => {
                        self.data_watches
                            .contains(&r.path, conn, Some(Mode::Recursive))
                    }
                    watcher_type::ANY => {
                        self.child_watches.contains(&r.path, conn, None)
                            || self.data_watches.contains(&r.path, conn, None)
                    }
                    _ => return err(code::MARSHALLING_ERROR),
                };
                if found {
                    Ok(Response::Empty)
                } else {
                    err(code::NO_WATCHER)
                }
            }
            Request::RemoveWatches(r) => {
                let removed = match r.kind {
                    watcher_type::CHILDREN => {
                        self.child_watches
                            .remove(&r.path, conn, Some(Mode::Standard))
                    }
                    watcher_type::DATA => {
                        self.data_watches
                            .remove(&r.path, conn, Some(Mode::Standard))
                    }
                    watcher_type::PERSISTENT => {
                        let a = self
                            .child_watches
                            .remove(&r.path, conn, Some(Mode::Persistent));
                        let b = self
                            .data_watches
                            .remove(&r.path, conn, Some(Mode::Persistent));
                        a || b
                    }
                    watcher_type::PERSISTENT_RECURSIVE => {
                        self.data_watches
                            .remove(&r.path, conn, Some(Mode::Recursive))
                    }
                    watcher_type::ANY => {
                        let a = self.child_watches.remove(&r.path, conn, None);
                        let b = self.data_watches.remove(&r.path, conn, None);
                        a || b
                    }
                    _ => return err(code::MARSHALLING_ERROR),
                };
                if removed {
                    Ok(Response::Empty)
                } else {
                    err(code::NO_WATCHER)
                }
            }
            Request::WhoAmI => Ok(Response::WhoAmI(WhoAmIResponse {
                client_info: caller
                    .auth
                    .iter()
                    .map(|id| ClientInfo {
                        auth_scheme: id.scheme.clone(),
                        user: match id.scheme.as_str() {
                            "digest" => id.id.split(':').next().unwrap_or("").to_owned(),
                            "ip" => id.id.clone(),
                            _ => String::new(),
                        },
                    })
                    .collect(),
            })),
            _ => err(code::UNIMPLEMENTED),
        }
    }

    fn get_data(
        &mut self,
        conn: ConnId,
        caller: &Caller,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), i32> {
        let Some(n) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        if !acl::allowed(&n.acl, perms::READ, &caller.auth) {
            return err(code::NO_AUTH);
        }
        let r = (n.data.clone(), n.stat());
        if watch {
            self.data_watches.add(path, conn, Mode::Standard);
        }
        Ok(r)
    }

    fn get_children(
        &mut self,
        conn: ConnId,
        caller: &Caller,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<String>, Stat), i32> {
        let Some(n) = self.tree.get(path) else {
            return err(code::NO_NODE);
        };
        if !acl::allowed(&n.acl, perms::READ, &caller.auth) {
            return err(code::NO_AUTH);
        }
        let r = (n.children.listed(), n.stat());
        if watch {
            self.child_watches.add(path, conn, Mode::Standard);
        }
        Ok(r)
    }

    /// `DataTree.setWatches`: a watch whose node changed since `relative_zxid` fires at once
    /// (zxid -1), the others are re-armed.
    fn set_watches(&mut self, conn: ConnId, w: SetWatches2, out: &mut Vec<Out>) {
        let mut notify = |kind, path: &str| {
            out.push(Out::Notify {
                conn,
                zxid: -1,
                event: WatcherEvent {
                    kind,
                    state: zklock_proto::keeper_state::SYNC_CONNECTED,
                    path: path.to_owned(),
                },
            });
        };
        for path in &w.data_watches {
            match self.tree.get(path) {
                None => notify(event_type::NODE_DELETED, path),
                Some(n) if n.mzxid > w.relative_zxid => notify(event_type::NODE_DATA_CHANGED, path),
                Some(_) => self.data_watches.add(path, conn, Mode::Standard),
            }
        }
        for path in &w.exist_watches {
            if self.tree.get(path).is_some() {
                notify(event_type::NODE_CREATED, path);
            } else {
                self.data_watches.add(path, conn, Mode::Standard);
            }
        }
        for path in &w.child_watches {
            match self.tree.get(path) {
                None => notify(event_type::NODE_DELETED, path),
                Some(n) if n.pzxid > w.relative_zxid => {
                    notify(event_type::NODE_CHILDREN_CHANGED, path)
                }
                Some(_) => self.child_watches.add(path, conn, Mode::Standard),
            }
        }
        for path in &w.persistent_watches {
            self.child_watches.add(path, conn, Mode::Persistent);
            self.data_watches.add(path, conn, Mode::Persistent);
        }
        for path in &w.persistent_recursive_watches {
            self.data_watches.add(path, conn, Mode::Recursive);
        }
    }

    /// Fires the watches of committed changes, in order (`DataTree`'s triggerWatch calls).
    pub(crate) fn fire(&mut self, changes: Vec<Change>, out: &mut Vec<Out>) {
        for c in changes {
            let conns = match c.kind {
                event_type::NODE_DELETED => {
                    // One NodeDeleted per connection for its data and child watches alike.
                    let mut conns = self.data_watches.trigger(&c.path);
                    for x in self.child_watches.trigger(&c.path) {
                        if !conns.contains(&x) {
                            conns.push(x);
                        }
                    }
                    conns
                }
                event_type::NODE_CHILDREN_CHANGED => self.child_watches.trigger(&c.path),
                _ => self.data_watches.trigger(&c.path),
            };
            if let Some(n) = usize::try_from(c.kind - 1)
                .ok()
                .and_then(|i| self.counters.fired.get_mut(i))
            {
                *n += conns.len() as u64;
            }
            for conn in conns {
                let Some(cx) = self.conns.get(&conn) else {
                    continue;
                };
                // 3.9.2 filters notifications by the node's ACL.
                if !acl::allowed(&c.acl, perms::READ, &cx.auth) {
                    continue;
                }
                out.push(Out::Notify {
                    conn,
                    zxid: c.zxid,
                    event: WatcherEvent {
                        kind: c.kind,
                        state: zklock_proto::keeper_state::SYNC_CONNECTED,
                        path: c.path.clone(),
                    },
                });
            }
        }
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
