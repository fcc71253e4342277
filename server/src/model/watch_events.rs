//! Watches re-armed by a reconnecting client (`setWatches`) and fired by committed changes.

use zklock_proto::{event_type, perms, SetWatches2, WatcherEvent};

use super::ops::Change;
use super::watches::Mode;
use super::{acl, ConnId, Model, Out};

impl Model {
    /// `DataTree.setWatches`: a watch whose node changed since `relative_zxid` fires at once
    /// (zxid -1), the others are re-armed.
    pub(super) fn set_watches(&mut self, conn: ConnId, w: SetWatches2, out: &mut Vec<Out>) {
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
