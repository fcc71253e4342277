//! The session's requests that set watches: the one a waiter awaits itself, and a holder's
//! watch on its own node, which a task on the runtime follows (see `own_node.rs`).

use std::sync::Arc;
use std::time::Instant;

use crate::core::own_node::{NodeFlags, OwnNodeWatch};
use crate::error::Result;
use crate::wire as zk;

use super::own_node::follow_own_node;
use super::{NodeData, NodeStat, Seen, Session};

impl Session {
    /// Watches our lock node `path`, in the background, for the revocation marker and for its
    /// deletion by someone else.
    pub(crate) fn watch_own_node(&self, path: &str) -> Result<OwnNodeWatch> {
        let flags = Arc::new(NodeFlags::default());
        let (zk, path, raise) = (self.zk()?, path.to_owned(), flags.clone());
        let state = self.state_watcher();
        let task = self.spawn(follow_own_node(zk, path, state, raise));
        Ok(OwnNodeWatch::new(flags, task))
    }

    /// Sets a watch on `path` (getData-and-watch: an exists watch on a node deleted meanwhile
    /// would never fire). `None` if the node does not exist. Dropping the watcher removes the
    /// watch from the server.
    pub(crate) async fn watch_node_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<zk::OneshotWatcher>> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_and_watch_data(&p).await {
                    Ok((_, _, watcher)) => Ok(Some(watcher)),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
        .await
    }

    /// Reads `path` (data and stat) and sets a watch on it, as
    /// [`watch_node_async`](Self::watch_node_async) does. `None` if the node does not exist.
    pub(crate) async fn read_and_watch_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<(NodeData, zk::OneshotWatcher)>> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_and_watch_data(&p).await {
                    Ok((data, stat, watcher)) => Ok(Some(((data, NodeStat::from(&stat)), watcher))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
        .await
    }

    /// Lists `path` and sets a child watch on it.
    pub(crate) async fn watch_children_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, zk::OneshotWatcher)> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                zk.get_and_watch_children(&p)
                    .await
                    .map(|(children, _, watcher)| (children, watcher))
            })
        })
        .await
    }
}
