//! The session's requests that set watches, each handing its watch to a task on the runtime
//! that wakes the waiting thread (see `watch.rs`).

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::wire as zk;

use super::prefetch::{Prefetch, Then};
use super::watch::{NodeFlags, NodeWatch, OwnNodeWatch, Signal};
use super::{Seen, Session};

impl Session {
    /// Watches our lock node `path`, in the background, for the revocation marker and for its
    /// deletion by someone else.
    pub(crate) fn watch_own_node(&self, path: &str) -> Result<OwnNodeWatch> {
        let flags = Arc::new(NodeFlags::default());
        let (zk, path, raise) = (self.zk()?, path.to_owned(), flags.clone());
        let state = self.state_watcher();
        let task = self.spawn(OwnNodeWatch::watch(zk, path, state, raise));
        Ok(OwnNodeWatch::new(flags, task))
    }

    /// Sets a watch on `path` (getData-and-watch: an exists watch on a node deleted meanwhile
    /// would never fire) that signals `signal` on a change or deletion, and on every session
    /// state change. `None` if the node does not exist.
    pub(crate) fn watch_node(
        &self,
        path: &str,
        signal: &Arc<Signal>,
        deadline: Option<Instant>,
        then: Option<Then>,
    ) -> Result<Option<(NodeWatch, Prefetch)>> {
        let watcher = self.retry(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_and_watch_data(&p).await {
                    Ok((_, _, watcher)) => Ok(Some(watcher)),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })?;
        let Some(watcher) = watcher else {
            return Ok(None);
        };
        let prefetch = Prefetch::default();
        let follow_up = match then {
            None => None,
            Some(then) => Some(then.follow_up(self.zk()?, prefetch.clone())),
        };
        let watch = NodeWatch::spawn(
            &self.handle,
            watcher,
            self.state_watcher(),
            signal.clone(),
            follow_up,
        );
        Ok(Some((watch, prefetch)))
    }

    /// Lists `path` and sets a child watch that signals `signal` (like [`watch_node`]
    /// (Self::watch_node) does for one node).
    pub(crate) fn watch_children(
        &self,
        path: &str,
        signal: &Arc<Signal>,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, NodeWatch)> {
        let (children, watcher) = self.retry(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                zk.get_and_watch_children(&p)
                    .await
                    .map(|(children, _, watcher)| (children, watcher))
            })
        })?;
        Ok((
            children,
            NodeWatch::spawn(
                &self.handle,
                watcher,
                self.state_watcher(),
                signal.clone(),
                None,
            ),
        ))
    }
}
