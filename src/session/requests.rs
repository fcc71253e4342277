//! The session's plain requests: reads, and the writes that are safe to repeat (each says why),
//! retried across reconnects until their deadline.

use std::time::Instant;

use log::{debug, warn};

use crate::error::{Error, Result};
use crate::wire as zk;

use super::errors::outcome_unknown;
use super::op::Op;
use super::{until, NodeData, NodeStat, Seen, Session, PARENT_SWEPT_RETRIES};

impl Session {
    /// Makes the server we are connected to catch up with the leader on `path`, so that a
    /// read after it sees every write committed before it (ours from an earlier connection,
    /// in particular: a follower we reconnected to may lag). A read; retried.
    pub(crate) async fn sync_async(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.retry_async(path, deadline, Seen::ByLeader, |zk, p| {
            Box::pin(async move { zk.sync(&p).await })
        })
        .await
    }

    /// The children of `path` and its stat (getChildren2); `NoNode` as an error.
    pub(crate) async fn list_with_stat_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, NodeStat)> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                zk.get_children(&p)
                    .await
                    .map(|(children, stat)| (children, NodeStat::from(&stat)))
            })
        })
        .await
    }

    /// The children of `path`; `NoNode` as an error.
    pub(crate) async fn list_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Vec<String>> {
        // The same getChildren2 request: the stat is in every reply.
        let (children, _) = self.list_with_stat_async(path, deadline).await?;
        Ok(children)
    }

    /// The children of `path`, asked for at once: the request is on its way when this returns,
    /// so that what the answer shows is known to be no older than the call (local handoff's
    /// checks, `core/cohort.rs`). Not retried: `None` if no answer came (the connection was
    /// lost, the client closed) or the server refused.
    pub(crate) fn list_sent_now(
        &self,
        path: &str,
    ) -> impl std::future::Future<Output = Option<Vec<String>>> + Send + 'static {
        let sent = self.zk().ok().map(|zk| zk.get_children(path));
        async move { sent?.await.ok().map(|(children, _)| children) }
    }

    /// Whether `path` exists, whatever its ACL: ZooKeeper 3.9 answers exists on a node that
    /// denies READ with NoAuth (earlier releases with its stat), which proves it is there
    /// ([`zk::Transport::exists`](crate::wire::Transport::exists)).
    pub(crate) async fn exists_async(&self, path: &str, deadline: Option<Instant>) -> Result<bool> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move { zk.exists(&p).await })
        })
        .await
    }

    /// Data and stat of `path`, `None` if it does not exist.
    pub(crate) async fn get_data_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeData>> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_data(&p).await {
                    Ok((data, stat)) => Ok(Some((data, NodeStat::from(&stat)))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
        .await
    }

    /// Data and stat of each of `paths` under `parent` (`None` for a missing one). The reads
    /// are sent back to back and awaited together: one round trip, not one per node.
    pub(crate) async fn get_data_many_async(
        &self,
        parent: &str,
        names: &[&str],
        deadline: Option<Instant>,
    ) -> Result<Vec<Option<NodeData>>> {
        let paths: Vec<String> = names
            .iter()
            .map(|name| format!("{parent}/{name}"))
            .collect();
        self.retry_async(parent, deadline, Seen::ByServer, move |zk, _| {
            let paths = paths.clone();
            Box::pin(async move {
                // In batches (one `multiRead` each, all sent at once): a long queue's tens of
                // thousands of nodes take one request per batch instead of one each.
                let batches: Vec<_> = read_batches(&paths)
                    .map(|batch| {
                        let reply = zk.get_data_each(&batch);
                        (batch, reply)
                    })
                    .collect();
                let mut found = Vec::with_capacity(paths.len());
                for (batch, reply) in batches {
                    let reads = match reply.await {
                        Ok(reads) => reads,
                        // Nodes with large data: their batch's reply is over the client's
                        // limit; one request each may still fit.
                        Err(zk::Error::ReplyTooLarge { .. }) if batch.len() > 1 => {
                            let replies: Vec<_> = batch.iter().map(|p| zk.get_data(p)).collect();
                            let mut reads = Vec::with_capacity(replies.len());
                            for reply in replies {
                                reads.push(reply.await);
                            }
                            reads
                        }
                        Err(err) => return Err(err),
                    };
                    for read in reads {
                        found.push(match read {
                            Ok((data, stat)) => Some((data, NodeStat::from(&stat))),
                            Err(zk::Error::NoNode) => None,
                            Err(err) => return Err(err),
                        });
                    }
                }
                Ok(found)
            })
        })
        .await
    }

    /// Creates the lock path `path` and its missing ancestors as container nodes (the server
    /// removes them once they are empty, so lock parents do not pile up). The lock path gets
    /// the lock ACL; the ancestors the parent ACL, so that one identity's creator-only lock
    /// does not close a shared parent to every other identity.
    ///
    /// Retry rule: repeated freely. It only creates what is missing, and a node that exists
    /// already is what was asked for.
    pub(crate) async fn ensure_path_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let Some(parent) = crate::znode::path::parent(path) else {
            let acl = self.acl.acls();
            return self
                .mkdir_async(path, zk::CreateMode::Container, acl, deadline)
                .await;
        };
        let acl = self.acl;
        let mut swept = 0;
        loop {
            self.mkdir_async(parent, zk::CreateMode::Container, self.parent_acl, deadline)
                .await?;
            // The lock path alone, not `mkdir -p`: had the sweep removed the parent again in
            // between, `mkdir -p` would recreate it with the lock's ACL.
            let created = self
                .retry_async(path, deadline, Seen::ByLeader, move |zk, p| {
                    Box::pin(async move {
                        let options = zk::CreateMode::Container.with_acls(acl.acls());
                        match zk.create(&p, &[], &options).await {
                            Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                            Err(err) => Err(err),
                        }
                    })
                })
                .await;
            match created {
                Err(Error::NoNode { .. }) if swept < PARENT_SWEPT_RETRIES => swept += 1,
                outcome => return outcome,
            }
        }
    }

    /// `mkdir -p`, recreating the chroot first if it has been deleted.
    async fn mkdir_async(
        &self,
        path: &str,
        mode: zk::CreateMode,
        acl: zk::Acls,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let write = || {
            self.retry_async(path, deadline, Seen::ByLeader, move |zk, p| {
                Box::pin(async move { zk.mkdir(&p, &mode.with_acls(acl)).await })
            })
        };
        match write().await {
            Err(Error::NoNode { .. }) if self.chroot().is_some() => {
                self.recreate_chroot(deadline).await?;
                write().await
            }
            outcome => outcome,
        }
    }

    /// Creates the chroot again, which someone deleted.
    async fn recreate_chroot(&self, deadline: Option<Instant>) -> Result<()> {
        let Some(chroot) = self.chroot() else {
            return Ok(());
        };
        warn!("chroot {} is gone; creating it again", chroot.path);
        let parent_acl = self.parent_acl;
        self.retry_async(&chroot.path, deadline, Seen::ByLeader, |_, _| {
            chroot.create(parent_acl)
        })
        .await
    }

    /// Deletes `path` only if it is still the node created at zxid `czxid` with data version
    /// `version`: `Ok(true)` once it is gone after our delete, `Ok(false)` if the server says
    /// it was gone before, [`Error::NodeChanged`] if it changed.
    ///
    /// Retry rule: a delete whose reply was lost is never simply repeated (the repeat would
    /// find the node gone and report it as gone before). The node is read again: unchanged,
    /// the delete did not happen and is sent again; absent, it is gone after our request
    /// (ours, or its owner's release: either way what was asked); changed, refused.
    pub(crate) async fn delete_if_unchanged_async(
        &self,
        path: &str,
        czxid: i64,
        version: i32,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        self.check_process()?;
        loop {
            let zk = self.zk()?;
            let target = path.to_owned();
            let op: Op<()> = Box::pin(async move { zk.delete(&target, Some(version)).await });
            let sent = Instant::now();
            let outcome = until(op, deadline).await;
            if let Ok(answer) = &outcome {
                self.answered(sent, answer);
            }
            match outcome {
                Ok(Ok(())) => return Ok(true),
                Ok(Err(zk::Error::NoNode)) => return Ok(false),
                Ok(Err(err)) if outcome_unknown(&err) => {
                    debug!("delete of {path} got no answer ({err}); reading it again");
                    self.pause_before_retry_async(deadline).await?;
                    self.sync_async(path, deadline).await?;
                    match self.get_data_async(path, deadline).await? {
                        None => return Ok(true),
                        Some((_, stat)) if stat.czxid == czxid && stat.version == version => {}
                        Some(_) => {
                            return Err(Error::NodeChanged {
                                path: path.to_owned(),
                            })
                        }
                    }
                }
                Ok(Err(err)) => return Err(self.error(err, path)),
                Err(_) => {
                    return Err(Error::OutcomeUnknown {
                        path: path.to_owned(),
                    })
                }
            }
        }
    }

    /// Writes `data` into `path` if it exists: `Ok(false)` if it does not.
    ///
    /// Retry rule: repeated freely. It is used for Curator's revocation marker on a lock node,
    /// whose protected name is never reused: writing the marker twice asks the same holder the
    /// same thing.
    pub(crate) async fn set_existing_async(
        &self,
        path: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let data = data.to_vec();
        self.retry_async(path, deadline, Seen::ByLeader, move |zk, p| {
            let data = data.clone();
            Box::pin(async move {
                match zk.set_data(&p, &data, None).await {
                    Ok(_) => Ok(true),
                    Err(zk::Error::NoNode) => Ok(false),
                    Err(err) => Err(err),
                }
            })
        })
        .await
    }

    /// Creates or overwrites a persistent node (missing parents are created persistent too).
    ///
    /// Retry rule: repeated freely. The write is unconditional, so a repeat leaves the same
    /// data as a single write applied at the later moment would.
    pub(crate) async fn put_async(
        &self,
        path: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<()> {
        if let Some(parent) = crate::znode::path::parent(path) {
            self.mkdir_async(
                parent,
                zk::CreateMode::Persistent,
                self.parent_acl,
                deadline,
            )
            .await?;
        }
        let acl = self.acl;
        let write = || {
            let data = data.to_vec();
            self.retry_async(path, deadline, Seen::ByLeader, move |zk, p| {
                let data = data.clone();
                Box::pin(async move {
                    let options = zk::CreateMode::Persistent.with_acls(acl.acls());
                    match zk.set_data(&p, &data, None).await {
                        Err(zk::Error::NoNode) => {}
                        other => return other.map(drop),
                    }
                    match zk.create(&p, &data, &options).await {
                        Err(zk::Error::NodeExists) => zk.set_data(&p, &data, None).await.map(drop),
                        other => other.map(drop),
                    }
                })
            })
        };
        // Even the chroot may be missing (someone deleted it): create it again, write again.
        match write().await {
            Err(Error::NoNode { .. }) if self.chroot().is_some() => {
                self.recreate_chroot(deadline).await?;
                write().await
            }
            outcome => outcome,
        }
    }
}

/// The most reads in one `multiRead`, and the most bytes of paths: replies of about 150 KB for
/// zklock's and Curator's nodes, requests far under the server's `jute.maxbuffer`.
const READ_BATCH: usize = 1_000;
const READ_BATCH_BYTES: usize = 256 * 1024;

/// `paths` cut into batches of at most [`READ_BATCH`] reads and [`READ_BATCH_BYTES`] of paths
/// (a longer path goes alone).
fn read_batches(paths: &[String]) -> impl Iterator<Item = Vec<&str>> {
    let mut rest = paths;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut take = 0;
        for path in rest.iter().take(READ_BATCH) {
            bytes += path.len();
            if take > 0 && bytes > READ_BATCH_BYTES {
                break;
            }
            take += 1;
        }
        let (batch, after) = rest.split_at(take);
        rest = after;
        Some(batch.iter().map(String::as_str).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_go_in_batches_bounded_by_count_and_bytes() {
        let short: Vec<String> = (0..2_500).map(|i| format!("/q/n{i:010}")).collect();
        let sizes: Vec<usize> = read_batches(&short).map(|b| b.len()).collect();
        assert_eq!(sizes, [1_000, 1_000, 500]);
        let long: Vec<String> = (0..5)
            .map(|i| format!("/{i}{}", "x".repeat(100_000)))
            .collect();
        let batches: Vec<Vec<&str>> = read_batches(&long).collect();
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        assert_eq!(
            batches.concat(),
            long.iter().map(String::as_str).collect::<Vec<_>>()
        );
        let huge = vec!["/".repeat(READ_BATCH_BYTES + 1), "/a".to_owned()];
        assert_eq!(
            read_batches(&huge).map(|b| b.len()).collect::<Vec<_>>(),
            [1, 1]
        );
        assert_eq!(read_batches(&[]).count(), 0);
    }
}
