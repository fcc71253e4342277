//! The data tree, as ZooKeeper's `DataTree` keeps it: nodes and their stats, a parent's
//! child counter (`cversion`, which numbers sequential nodes and stops at 2^31-1), and the
//! requests the server applies to it.

use std::collections::BTreeSet;

use super::{parent_of, WatchKind, World, OPERATOR};
use crate::session::NodeStat;
use crate::wire as zk;

/// A znode's full stat, as the server keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) czxid: i64,
    pub(crate) mzxid: i64,
    pub(crate) pzxid: i64,
    pub(crate) ctime: i64,
    pub(crate) version: i32,
    pub(crate) cversion: i32,
    pub(crate) ephemeral_owner: i64,
}

impl Stat {
    pub(crate) fn node_stat(&self) -> NodeStat {
        NodeStat {
            czxid: self.czxid,
            ephemeral_owner: self.ephemeral_owner,
            ctime: self.ctime,
            version: self.version,
        }
    }
}

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Persistent,
    Ephemeral,
    Container,
}

pub(super) struct ZNode {
    pub(super) stat: Stat,
    pub(super) container: bool,
    pub(super) children: BTreeSet<String>,
}

/// A request, as the server receives it.
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
}

/// A server's answer.
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
    /// Applies `op` for session `id`, as the server would.
    pub(super) fn apply(&mut self, id: i64, op: &Op) -> Result<Reply, ZkErr> {
        if self.session(id).server_ended {
            return Err(ZkErr::SessionExpired);
        }
        match op {
            Op::Create {
                path,
                mode,
                sequential,
            } => {
                let parent_path = parent_of(path).to_owned();
                let Some(parent) = self.nodes.get(&parent_path) else {
                    return Err(ZkErr::NoNode);
                };
                let cversion = parent.stat.cversion;
                let path = if *sequential {
                    format!("{path}{cversion:010}")
                } else {
                    path.clone()
                };
                if self.nodes.contains_key(&path) {
                    return Err(ZkErr::NodeExists);
                }
                self.zxid += 1;
                let owner = match mode {
                    Mode::Ephemeral => id,
                    _ => 0,
                };
                let stat = self.fresh_stat(owner);
                let name = path[parent_path.len()..].trim_start_matches('/').to_owned();
                let zxid = self.zxid;
                let parent = self.nodes.get_mut(&parent_path).expect("checked");
                parent.children.insert(name);
                bump_cversion(&mut parent.stat, zxid);
                self.nodes.insert(
                    path.clone(),
                    ZNode {
                        stat,
                        container: *mode == Mode::Container,
                        children: BTreeSet::new(),
                    },
                );
                self.trigger_data(&path, zk::EventType::NodeCreated);
                self.trigger_child(&parent_path, zk::EventType::NodeChildrenChanged);
                let mut stat = stat;
                if let Some(owner) = self.reported_owner {
                    stat.ephemeral_owner = owner;
                }
                if self.stale_owner.remove(&id) {
                    // A stale reply (a lagging follower's view of another node by that name).
                    stat.ephemeral_owner = OPERATOR;
                }
                Ok(Reply::Created { path, stat })
            }
            Op::Delete { path } => {
                match self.nodes.get(path) {
                    None => return Err(ZkErr::NoNode),
                    Some(n) if !n.children.is_empty() => return Err(ZkErr::NotEmpty),
                    Some(_) => {}
                }
                self.zxid += 1;
                self.delete_node(path)?;
                Ok(Reply::Done)
            }
            Op::Children { path, watch } => {
                let node = self.nodes.get(path).ok_or(ZkErr::NoNode)?;
                let mut names: Vec<String> = node.children.iter().cloned().collect();
                let stat = node.stat;
                if self.shuffle {
                    for i in (1..names.len()).rev() {
                        let j = self.rng.below(i + 1);
                        names.swap(i, j);
                    }
                }
                let watch = watch.then(|| self.register(id, WatchKind::Child, path));
                Ok(Reply::Children { names, stat, watch })
            }
            Op::GetData { path, watch } => {
                let stat = self.nodes.get(path).ok_or(ZkErr::NoNode)?.stat;
                if *watch {
                    self.session_mut(id).watched.push(path.clone());
                }
                let watch = watch.then(|| self.register(id, WatchKind::Data, path));
                Ok(Reply::Data { stat, watch })
            }
            Op::Sync => Ok(Reply::Done),
            Op::SetData { path } => {
                let zxid = self.zxid + 1;
                let node = self.nodes.get_mut(path).ok_or(ZkErr::NoNode)?;
                self.zxid = zxid;
                node.stat.mzxid = zxid;
                node.stat.version += 1;
                let stat = node.stat;
                self.trigger_data(path, zk::EventType::NodeDataChanged);
                Ok(Reply::Data { stat, watch: None })
            }
        }
    }

    /// Removes `path` (zxid already taken), firing the watches a delete fires.
    pub(super) fn delete_node(&mut self, path: &str) -> Result<(), ZkErr> {
        let node = self.nodes.remove(path).ok_or(ZkErr::NoNode)?;
        self.removed.insert(node.stat.czxid, self.zxid);
        let parent_path = parent_of(path).to_owned();
        let zxid = self.zxid;
        if let Some(parent) = self.nodes.get_mut(&parent_path) {
            let name = path[parent_path.len()..].trim_start_matches('/');
            parent.children.remove(name);
            bump_cversion(&mut parent.stat, zxid);
        }
        self.trigger_data(path, zk::EventType::NodeDeleted);
        self.trigger_child(path, zk::EventType::NodeDeleted);
        self.trigger_child(&parent_path, zk::EventType::NodeChildrenChanged);
        Ok(())
    }
}

/// ZooKeeper's rule for a parent's child counter: it only ever rises, so once at `i32::MAX`
/// it stays there (3.8's DataTree sets it only to a larger value).
fn bump_cversion(stat: &mut Stat, zxid: i64) {
    let next = stat.cversion.wrapping_add(1);
    if next > stat.cversion {
        stat.cversion = next;
    }
    stat.pzxid = zxid;
}
