//! The operator's changes (and the unit tests' direct ones): nodes made, deleted, replaced
//! or written at once, without a request of a simulated client; what the tree holds. Each
//! change is a request on the operator's connection to the model, or one of the model's
//! handles; what the tree holds is read from the operator's watch on the whole tree.

use zklock_proto::{PathWatchRequest, Request, Response, Stat};

use super::{Mode, Op, Reply, World, OPERATOR};

impl World {
    /// Creates `path` (and its missing ancestors as persistent nodes) as the operator.
    pub(crate) fn mkdirs(&mut self, path: &str, mode: Mode) {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            if self.czxid(&at).is_none() {
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

    /// Creates an ephemeral node as session `id`, at once; its path.
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

    /// Deletes `path` at once (an operator's delete); `false` if it did not exist or has
    /// children.
    pub(crate) fn delete_now(&mut self, path: &str) -> bool {
        self.note(|| format!("operator deletes {path}"));
        let czxid = self.czxid(path);
        let mut out = Vec::new();
        let deleted = self.model.operator_delete(path, &mut out).is_ok();
        self.carry_out(out);
        if let (true, Some(czxid)) = (deleted, czxid) {
            self.operator_removed.insert(czxid);
        }
        deleted
    }

    /// Deletes `path` and everything below it, as the operator.
    pub(crate) fn operator_delete_tree(&mut self, path: &str) {
        let below: Vec<String> = self
            .live
            .range(path.to_owned()..)
            .take_while(|(p, _)| p.starts_with(path))
            .filter(|(p, _)| *p == path || p[path.len()..].starts_with('/'))
            .map(|(p, _)| p.clone())
            .collect();
        for p in below.iter().rev() {
            self.delete_now(p);
        }
    }

    /// Sets `path`'s child counter (its stored cversion): its next sequential child is
    /// numbered `cversion`.
    pub(crate) fn set_cversion(&mut self, path: &str, cversion: i32) {
        self.model.set_cversion(path, cversion);
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

    /// The children of `path` (sorted), as the operator's watch on the tree has seen them.
    pub(crate) fn children(&self, path: &str) -> Vec<String> {
        self.children_created(path)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    /// The children of `path` with their czxids.
    pub(crate) fn children_created(&self, path: &str) -> Vec<(String, i64)> {
        let prefix = if path == "/" {
            "/".to_owned()
        } else {
            format!("{path}/")
        };
        self.live
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter(|(p, _)| !p[prefix.len()..].contains('/'))
            .map(|(p, czxid)| (p[prefix.len()..].to_owned(), *czxid))
            .collect()
    }

    /// The stat of `path`, as the operator reads it.
    pub(crate) fn stat(&mut self, path: &str) -> Option<Stat> {
        let exists = Request::Exists(PathWatchRequest {
            path: path.to_owned(),
            watch: false,
        });
        let conn = self.operator_conn;
        match self.request(conn, exists).body {
            Response::Stat(r) => Some(r.stat),
            _ => None,
        }
    }

    /// The zxid of the latest transaction applied.
    pub(crate) fn zxid(&self) -> i64 {
        self.model.last_zxid()
    }

    /// Every ephemeral node: (path, owner).
    pub(crate) fn ephemerals(&self) -> Vec<(String, i64)> {
        self.model
            .sessions_dump()
            .into_iter()
            .flat_map(|(owner, (_, paths))| paths.into_iter().map(move |p| (p, owner)))
            .collect()
    }

    /// The server's container sweep, now.
    pub(crate) fn sweep_containers(&mut self) {
        let mut out = Vec::new();
        let now = self.model_now();
        self.model.sweep_containers(now, &mut out);
        self.carry_out(out);
    }
}
