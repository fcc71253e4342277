//! The client's calls on plain nodes, next to the locks: [`Client::get_data`],
//! [`Client::set_data`], [`Client::children`] and their async forms.

use crate::error::{Error, Result};

use super::Client;

impl Client {
    /// Reads the data of the node at `path`, or `None` if there is no such node.
    ///
    /// A small convenience for keeping state next to a lock (see `examples/counter.rs`).
    /// Blocks for one round trip, waiting for a lost connection to return for at most the
    /// session timeout.
    ///
    /// # Errors
    /// [`Error::InvalidPath`], [`Error::ConnectionLoss`], [`Error::SessionExpired`],
    /// [`Error::NoAuth`], or another [`Error::ZooKeeper`].
    pub fn get_data(&self, path: &str) -> Result<Option<Vec<u8>>> {
        crate::session::blocking(self.get_data_async(path))
    }

    /// As [`get_data`](Self::get_data), as a future (`Send`, any executor). Cancel safe:
    /// dropping it leaves nothing behind (a read sets nothing on the server).
    ///
    /// # Errors
    /// As [`get_data`](Self::get_data).
    pub async fn get_data_async(&self, path: &str) -> Result<Option<Vec<u8>>> {
        crate::znode::path::validate_lock_path(path)?;
        self.one_call_async(path, |session, deadline| async move {
            Ok(session
                .get_data_async(path, deadline)
                .await?
                .map(|(data, _)| data))
        })
        .await
    }

    /// The names of the children of the node at `path` (in no particular order), or `None` if
    /// there is no such node.
    ///
    /// For tools that look around a lock tree (`zklock status` on a parent of locks). Blocks
    /// for one round trip, waiting for a lost connection to return for at most the session
    /// timeout.
    ///
    /// # Errors
    /// As [`Client::get_data`].
    pub fn children(&self, path: &str) -> Result<Option<Vec<String>>> {
        crate::session::blocking(self.children_async(path))
    }

    /// As [`children`](Self::children), as a future (`Send`, any executor). Cancel safe:
    /// dropping it leaves nothing behind.
    ///
    /// # Errors
    /// As [`Client::get_data`].
    pub async fn children_async(&self, path: &str) -> Result<Option<Vec<String>>> {
        crate::znode::path::validate_lock_path(path)?;
        self.one_call_async(path, |session, deadline| async move {
            match session.list_async(path, deadline).await {
                Ok(children) => Ok(Some(children)),
                Err(Error::NoNode { .. }) => Ok(None),
                Err(err) => Err(err),
            }
        })
        .await
    }

    /// Writes `data` to the node at `path`, creating it (and missing parents, as persistent
    /// nodes) when absent. The write is unconditional: call it under a lock when several
    /// processes update the same node.
    ///
    /// Blocks for one or two round trips, waiting for a lost connection to return for at most
    /// the session timeout. Like every ZooKeeper write, if it fails with
    /// [`Error::ConnectionLoss`] it may or may not have been applied.
    ///
    /// # Errors
    /// As [`Client::get_data`], plus [`Error::EphemeralParent`].
    pub fn set_data(&self, path: &str, data: &[u8]) -> Result<()> {
        crate::session::blocking(self.set_data_async(path, data))
    }

    /// As [`set_data`](Self::set_data), as a future (`Send`, any executor). Dropped before it
    /// completes, the write may or may not have been applied (as after a
    /// [`Error::ConnectionLoss`]); nothing else is left behind.
    ///
    /// # Errors
    /// As [`set_data`](Self::set_data).
    pub async fn set_data_async(&self, path: &str, data: &[u8]) -> Result<()> {
        crate::znode::path::validate_lock_path(path)?;
        crate::znode::layout::check_data_size(data)?;
        self.one_call_async(path, |session, deadline| async move {
            session.put_async(path, data, deadline).await
        })
        .await
    }
}
