//! Creating a lock node: the create and the listing of its lock path, pipelined, and what a
//! lost or late reply leaves to do.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use crate::core::session_view::Elapsed;
use crate::error::Result;
use crate::wire as zk;

use super::delete::{delete_until_gone, sweep};
use super::errors::outcome_unknown;
use super::op::{Op, ZkResult};
use super::{until, NodeStat, Session};

// The core's word for a create's outcome (see `core/session_view.rs`).
pub(crate) use crate::core::session_view::Create;

/// The replies to a pipelined create (node name, stat) and listing.
type CreateAndList = (
    ZkResult<(String, NodeStat)>,
    ZkResult<(Vec<String>, NodeStat)>,
);

impl Session {
    /// Creates the ephemeral sequential node `prefix` + sequence and, pipelined behind it on the
    /// same session, lists `lock_path`. ZooKeeper executes one session's requests in order, so
    /// the listing contains our node and every node created before it. Dropped before the create is
    /// answered (a dropped future, or the deadline), the node it may still make is deleted in
    /// the background; on a live connection `settling()` is called then, and what it gives is
    /// dropped once that deletion is settled (a caller that stopped waits for it, as for the
    /// withdrawal of a node it knew).
    pub(crate) async fn create_lock_node_async<D: Send + 'static>(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
        settling: impl FnOnce() -> D,
    ) -> Result<Create> {
        self.check_process()?;
        let (zk, acl) = (self.zk()?, self.acl);
        let (node_prefix, list_path, data) = (
            format!("{lock_path}/{prefix}"),
            lock_path.to_owned(),
            data.to_vec(),
        );
        // Alone on its lock path, the create pipelines its listing (one round trip); among
        // others, a listing each would cost O(N²) bytes, so they share listings sent after
        // their creates.
        let _creating = Creating::begin(&self.creating, lock_path);
        let with_listing = _creating.alone;
        let plan = self.paths_seen.plan(zk.knows_parent(&node_prefix));
        let paths_seen = self.paths_seen.clone();
        let op: Op<CreateAndList> = Box::pin(async move {
            // All requests are sent here, before the first await, in one write (the create may
            // go out in a `multi` with others, the listing then right behind it).
            let (made, create, list) = {
                let _cork = zk.cork();
                let made = plan.make_path.then(|| {
                    let options = zk::CreateMode::Container.with_acls(acl.acls());
                    zk.create(&list_path, &[], &options)
                });
                let options = zk::CreateMode::EphemeralSequential.with_acls(acl.acls());
                let create = zk.create_own(&node_prefix, &data, &options, plan.coalesce);
                // getChildren2: the lock path's stat comes with the listing, at no extra cost.
                let list = with_listing.then(|| zk.get_children(&list_path));
                (made, create, list)
            };
            if let Some(made) = made {
                // Whatever it says (NodeExists; a missing parent or a refusal, which the
                // create below meets too), the create's own answer decides.
                match made.await {
                    Ok(_) => paths_seen.learn(false),
                    Err(zk::Error::NodeExists) => paths_seen.learn(true),
                    Err(err) => log::trace!("making {list_path} before creating in it: {err}"),
                }
            }
            let created = create.await;
            if plan.unknown && !plan.make_path {
                match &created {
                    Ok(_) => paths_seen.learn(true),
                    Err(zk::Error::NoNode) => paths_seen.learn(false),
                    Err(_) => {}
                }
            }
            let created = created.map(|(stat, created)| {
                let name = created.rsplit('/').next().unwrap_or_default().to_owned();
                (name, NodeStat::from(&stat))
            });
            let listed = match list {
                Some(list) => list
                    .await
                    .map(|(children, stat)| (children, NodeStat::from(&stat))),
                None => Err(zk::Error::ConnectionLoss), // Not asked: listed apart.
            };
            Ok((created, listed))
        });
        let mut pending = PendingCreate {
            session: self,
            lock_path,
            prefix,
            op: Some(op),
            settling: Some(settling),
        };
        let sent = Instant::now();
        let outcome = match pending.op.as_mut() {
            Some(op) => until(op, deadline).await.ok(),
            None => None,
        };
        let Some(outcome) = outcome else {
            drop(pending); // The create may still execute after the connection returns.
            return Ok(Create::Elapsed(Elapsed));
        };
        pending.op = None;
        if let Ok((answer, _)) = &outcome {
            self.answered(sent, answer);
        }
        match outcome {
            Ok((Ok((name, stat)), listing)) => {
                let (children, parent) = listing.ok().unzip();
                Ok(Create::Created {
                    name,
                    stat,
                    children,
                    parent,
                })
            }
            Ok((Err(err), _)) if outcome_unknown(&err) => Ok(Create::Unknown),
            Ok((Err(zk::Error::NoNode), _)) => Ok(Create::ParentMissing),
            Ok((Err(err), _)) => Err(self.error(err, lock_path)),
            Err(err) => Err(self.error(err, lock_path)),
        }
    }
}

/// One lock-node create in flight on a session, counted by lock path while it lives.
struct Creating<'a> {
    count: &'a Mutex<HashMap<String, usize>>,
    lock_path: &'a str,
    /// No other create on its lock path was in flight when this one began.
    alone: bool,
}

impl<'a> Creating<'a> {
    fn begin(count: &'a Mutex<HashMap<String, usize>>, lock_path: &'a str) -> Creating<'a> {
        let mut counts = count.lock();
        let n = counts.entry(lock_path.to_owned()).or_default();
        *n += 1;
        Creating {
            count,
            lock_path,
            alone: *n == 1,
        }
    }
}

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        let mut counts = self.count.lock();
        if let Some(n) = counts.get_mut(self.lock_path) {
            *n -= 1;
            if *n == 0 {
                counts.remove(self.lock_path);
            }
        }
    }
}

/// A create in flight: dropped before its reply was read, the node it may still make is
/// deleted in the background (or, if its reply is lost, looked for by its prefix).
struct PendingCreate<'a, F: FnOnce() -> D, D: Send + 'static> {
    session: &'a Session,
    lock_path: &'a str,
    prefix: &'a str,
    op: Option<Op<CreateAndList>>,
    /// Told when the deletion begins, on a live connection (see `create_lock_node_async`).
    settling: Option<F>,
}

impl<F: FnOnce() -> D, D: Send + 'static> Drop for PendingCreate<'_, F, D> {
    fn drop(&mut self) {
        let Some(op) = self.op.take() else {
            return;
        };
        let Ok(zk) = self.session.zk() else {
            return; // Closed: the node goes with the session.
        };
        // Waited for only on a live connection: during an outage no reply can come, and the
        // deletion goes on once the connection returns.
        let settled = self
            .settling
            .take()
            .filter(|_| self.session.liveness() == super::Liveness::Connected)
            .map(|settling| settling());
        let (lock_path, prefix) = (self.lock_path.to_owned(), self.prefix.to_owned());
        self.session.spawn_release(async move {
            let _settled = settled;
            match op.await {
                Ok((Ok((name, _)), _)) => {
                    delete_until_gone(&zk, &format!("{lock_path}/{name}")).await
                }
                Ok((Err(err), _)) if outcome_unknown(&err) => sweep(&zk, &lock_path, &prefix).await,
                _ => {}
            }
        });
    }
}
