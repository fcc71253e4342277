//! The writes: create, delete, setData, setACL and check, each with `PrepRequestProcessor`'s
//! checks in its order, applied to the tree under one transaction.

use zklock_proto::{
    code, create_mode, event_type, op, perms, Acl, Create2Response, CreateRequest, CreateResponse,
    MultiResponse, Request, Response, Stat, StatResponse,
};

use super::ops::{version_ok, Caller, Change, Txn};
use super::tree::{self, Kind, Node};
use super::{acl, err, Model, Now, Out};

impl Model {
    pub(super) fn write(
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

    pub(super) fn create2(
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

    pub(super) fn create(
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

    pub(super) fn delete(
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
    pub(super) fn delete_container(&mut self, path: &str, txn: &mut Txn) -> Result<(), i32> {
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

    pub(super) fn set_data(
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

    pub(super) fn set_acl(
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

    pub(super) fn check(&mut self, caller: &Caller, path: &str, version: i32) -> Result<Stat, i32> {
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
}
