//! Creating a lock node: the create and the listing of its lock path, pipelined, and what a
//! lost or late reply leaves to do.

use std::time::Instant;

use crate::error::{Error, Result};
use crate::rt::runtime::block_on;
use crate::wire as zk;

use super::errors::outcome_unknown;
use super::op::{Op, ZkResult};
use super::release::{delete_until_gone, sweep};
use super::{NodeStat, Session};

/// The replies to a pipelined create (node name, stat) and listing.
type CreateAndList = (
    ZkResult<(String, NodeStat)>,
    ZkResult<(Vec<String>, NodeStat)>,
);

/// Outcome of [`Session::create_lock_node`].
pub(crate) enum Create {
    /// Created; the listing of the lock path taken right after, and the lock path's own stat
    /// from the same reply, when it could be read.
    Created {
        name: String,
        stat: NodeStat,
        children: Option<Vec<String>>,
        parent: Option<NodeStat>,
    },
    /// The connection dropped before the reply: the node may or may not exist.
    Unknown,
    /// The deadline passed first. The request is still pending; a background task deletes the
    /// node if it appears.
    TimedOut,
    /// The lock path does not exist (yet, or any more).
    ParentMissing,
}

impl Session {
    /// Creates the ephemeral sequential node `prefix` + sequence and, pipelined behind it on the
    /// same session, lists `lock_path`. ZooKeeper executes one session's requests in order, so
    /// the listing contains our node and every node created before it.
    pub(crate) fn create_lock_node(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Create> {
        self.check_process()?;
        let (zk, acl) = (self.zk()?, self.acl);
        let (node_prefix, list_path, data) = (
            format!("{lock_path}/{prefix}"),
            lock_path.to_owned(),
            data.to_vec(),
        );
        let op: Op<CreateAndList> = Box::pin(async move {
            let options = zk::CreateMode::EphemeralSequential.with_acls(acl.acls());
            // Both requests are sent here, before the first await.
            let create = zk.create(&node_prefix, &data, &options);
            // getChildren2: the lock path's stat comes with the listing, at no extra cost.
            let list = zk.get_children(&list_path);
            let created = create.await.map(|(stat, created)| {
                let name = created.rsplit('/').next().unwrap_or_default().to_owned();
                (name, NodeStat::from(&stat))
            });
            let listed = list
                .await
                .map(|(children, stat)| (children, NodeStat::from(&stat)));
            Ok((created, listed))
        });
        let sent = Instant::now();
        let outcome = block_on(op, deadline);
        if let Ok(Ok((answer, _))) = &outcome {
            self.answered(sent, answer);
        }
        match outcome {
            Ok(Ok((Ok((name, stat)), listing))) => {
                let (children, parent) = listing.ok().unzip();
                Ok(Create::Created {
                    name,
                    stat,
                    children,
                    parent,
                })
            }
            Ok(Ok((Err(err), _))) if outcome_unknown(&err) => Ok(Create::Unknown),
            Ok(Ok((Err(zk::Error::NoNode), _))) => Ok(Create::ParentMissing),
            Ok(Ok((Err(err), _))) => Err(Error::from_zk(err, lock_path)),
            Ok(Err(err)) => Err(Error::from_zk(err, lock_path)),
            Err(pending) => {
                // The create may still execute after the connection returns.
                let Ok(zk) = self.zk() else {
                    return Ok(Create::TimedOut); // Closed: the node goes with the session.
                };
                let (lock_path, prefix) = (lock_path.to_owned(), prefix.to_owned());
                self.spawn_release(async move {
                    match pending.await {
                        Ok((Ok((name, _)), _)) => {
                            delete_until_gone(&zk, &format!("{lock_path}/{name}")).await
                        }
                        Ok((Err(err), _)) if outcome_unknown(&err) => {
                            sweep(&zk, &lock_path, &prefix).await
                        }
                        _ => {}
                    }
                });
                Ok(Create::TimedOut)
            }
        }
    }
}
