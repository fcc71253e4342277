//! The reads, answered as `FinalRequestProcessor` does, with the watches they set.

use zklock_proto::{
    add_watch_mode, code, perms, watcher_type, ClientInfo, ErrorResponse, GetAclResponse,
    GetAllChildrenNumberResponse, GetChildren2Response, GetChildrenResponse, GetDataResponse,
    GetEphemeralsResponse, MultiOp, MultiResponse, OpResult, PathRequest, Request, Response, Stat,
    StatResponse, WhoAmIResponse,
};

use super::ops::Caller;
use super::tree::Node;
use super::watches::Mode;
use super::{acl, err, ConnId, Model};

impl Model {
    pub(super) fn read(
        &mut self,
        conn: ConnId,
        caller: &Caller,
        req: Request,
    ) -> Result<Response, i32> {
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

    pub(super) fn get_data(
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

    pub(super) fn get_children(
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
}
