//! The operator's changes (and the unit tests' direct ones): nodes made, deleted, replaced
//! or written at once, without a request; the server's container sweep; what the tree holds.

use super::{Mode, Op, Reply, World, OPERATOR};

impl World {
    /// Creates `path` (and its missing ancestors as persistent nodes) as the operator.
    pub(crate) fn mkdirs(&mut self, path: &str, mode: Mode) {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            if !self.nodes.contains_key(&at) {
                let m = if at == path { mode } else { Mode::Persistent };
                let op = Op::Create {
                    path: at.clone(),
                    mode: m,
                    sequential: false,
                };
                let _ = self.apply(OPERATOR, &op);
            }
        }
    }

    /// Creates a node as session `id`, at once; its path.
    pub(crate) fn create_now(&mut self, id: i64, path: &str, sequential: bool) -> Option<String> {
        let op = Op::Create {
            path: path.to_owned(),
            mode: Mode::Ephemeral,
            sequential,
        };
        let saved = self.reported_owner.take();
        let created = self.apply(id, &op);
        self.reported_owner = saved;
        match created {
            Ok(Reply::Created { path, .. }) => Some(path),
            _ => None,
        }
    }

    /// Deletes `path` at once (as the operator); `false` if it did not exist or has children.
    pub(crate) fn delete_now(&mut self, path: &str) -> bool {
        self.note(|| format!("operator deletes {path}"));
        if let Some(node) = self.nodes.get(path) {
            self.operator_removed.insert(node.stat.czxid);
        }
        self.apply(
            OPERATOR,
            &Op::Delete {
                path: path.to_owned(),
            },
        )
        .is_ok()
    }

    /// Deletes `path` and everything below it, as the operator.
    pub(crate) fn operator_delete_tree(&mut self, path: &str) {
        let below: Vec<String> = self
            .nodes
            .range(path.to_owned()..)
            .take_while(|(p, _)| p.starts_with(path))
            .filter(|(p, _)| *p == path || p[path.len()..].starts_with('/'))
            .map(|(p, _)| p.clone())
            .collect();
        for p in below.iter().rev() {
            self.delete_now(p);
        }
    }

    /// Sets `path`'s child counter (its cversion).
    pub(crate) fn set_cversion(&mut self, path: &str, cversion: i32) {
        if let Some(node) = self.nodes.get_mut(path) {
            node.stat.cversion = cversion;
        }
    }

    /// The operator writes `path`'s data (as a revocation request does); `false` if missing.
    pub(crate) fn set_data_now(&mut self, path: &str) -> bool {
        self.note(|| format!("operator writes {path}"));
        self.apply(
            OPERATOR,
            &Op::SetData {
                path: path.to_owned(),
            },
        )
        .is_ok()
    }

    pub(crate) fn children(&self, path: &str) -> Vec<String> {
        self.nodes
            .get(path)
            .map(|n| n.children.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The children of `path` with their czxids.
    pub(crate) fn children_created(&self, path: &str) -> Vec<(String, i64)> {
        self.children(path)
            .into_iter()
            .filter_map(|name| {
                let node = self.nodes.get(&format!("{path}/{name}"))?;
                Some((name, node.stat.czxid))
            })
            .collect()
    }

    /// The zxid of the latest transaction applied.
    pub(crate) fn zxid(&self) -> i64 {
        self.zxid
    }

    /// Every ephemeral node: (path, owner).
    pub(crate) fn ephemerals(&self) -> Vec<(String, i64)> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner != 0)
            .map(|(p, n)| (p.clone(), n.stat.ephemeral_owner))
            .collect()
    }

    /// The server's container sweep: empty containers that once had children go, one level
    /// per sweep.
    pub(crate) fn sweep_containers(&mut self) {
        let empty: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.container && n.children.is_empty() && n.stat.cversion > 0)
            .map(|(p, _)| p.clone())
            .collect();
        for path in empty {
            self.note(|| format!("container sweep deletes {path}"));
            let _ = self.apply(OPERATOR, &Op::Delete { path });
        }
    }
}
