//! `MultiLock`: several locks taken as one, in a global order that cannot deadlock.

use std::fmt;
use std::sync::Arc;

use crate::client::Client;
use crate::core::held::Held;
use crate::core::kind::Kind;
use crate::core::ordered::take_in_order;
use crate::core::wait::Budget;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::znode::path::validate_lock_path;

use super::acquisition::envelope;
use super::catalogue::{MULTI_METRIC, MUTEX, WRITER};
use super::guard::LockGuard;
use super::guard_calls::guard_calls;
use super::queue::acquisitions;

/// Several locks (mutexes and write sides of read/write locks) acquired as one.
///
/// Every `MultiLock` takes its locks in the same global order (by path), so two processes
/// asking for overlapping sets can never deadlock. Acquisition is all or nothing: if one lock
/// cannot be had (timeout, error), those already taken are released before returning.
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// let client = zklock::Client::connect("127.0.0.1:2181")?;
/// let transfer = zklock::MultiLock::new(&client).mutex("/accounts/alice")?.mutex("/accounts/bob")?;
/// let _both = transfer.lock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    client: Client,
    members: Vec<(String, &'static Kind)>,
}

/// Proof that every lock of a [`MultiLock`] is held; releases them in reverse order on drop,
/// blocking at most the client's [release timeout](crate::ClientBuilder::release_timeout) for
/// all of them together (what is not confirmed by then goes on in the background).
#[must_use = "the locks are released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiLock {
    /// An empty set of locks; add members with [`mutex`](Self::mutex) and
    /// [`write_lock`](Self::write_lock).
    pub fn new(client: &Client) -> MultiLock {
        MultiLock {
            client: client.clone(),
            members: Vec::new(),
        }
    }

    /// Adds the [`DistributedMutex`](crate::DistributedMutex) at `path`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] if `path` is already a member.
    pub fn mutex(self, path: &str) -> Result<MultiLock> {
        self.add(path, &MUTEX)
    }

    /// Adds the write side of the [`DistributedRwLock`](crate::DistributedRwLock) at `path`.
    ///
    /// # Errors
    /// As [`mutex`](Self::mutex).
    pub fn write_lock(self, path: &str) -> Result<MultiLock> {
        self.add(path, &WRITER)
    }

    fn add(mut self, path: &str, kind: &'static Kind) -> Result<MultiLock> {
        validate_lock_path(path)?;
        match self.members.binary_search_by(|(p, _)| p.as_str().cmp(path)) {
            Ok(_) => Err(Error::InvalidArgument(
                "a path can be a member of a multi-lock only once",
            )),
            Err(at) => {
                self.members.insert(at, (path.to_owned(), kind));
                Ok(self)
            }
        }
    }

    /// The member paths, in acquisition order.
    pub fn paths(&self) -> Vec<&str> {
        self.members.iter().map(|(p, _)| p.as_str()).collect()
    }

    acquisitions!("every lock" => MultiGuard, via acquire(),
        errors "[`Error::InvalidArgument`] if no lock was added.":
        lock, try_lock, lock_timeout, lock_with;
        async lock_async, try_lock_async, lock_with_async);

    /// All or nothing, in the order of the paths (see `take_in_order`).
    async fn acquire(&self, attempt: Budget, background: bool) -> Result<Option<MultiGuard>> {
        if self.members.is_empty() {
            // A guard of nothing would be held by no one: every guard has at least one node.
            return Err(Error::InvalidArgument(
                "a multi-lock needs at least one member to lock",
            ));
        }
        let attempt = &attempt;
        // One session for every member: were it to expire half-way, the later members
        // would fail with it rather than be taken on a new session beside lost ones.
        let take = move |session: Arc<Session>, deadline| async move {
            let taken = take_in_order(&session, &self.members, attempt, deadline).await?;
            Ok(taken.map(|taken| MultiGuard {
                guards: taken
                    .into_iter()
                    .map(|held| LockGuard::new(held, self.client.clone()))
                    .collect(),
            }))
        };
        let paths = self.paths().join(",");
        envelope(
            &self.client,
            (MULTI_METRIC, &paths),
            attempt,
            background,
            take,
            |multi| multi.guards.iter_mut().map(|g| &mut g.held).collect(),
        )
        .await
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLock")
            .field("paths", &self.paths())
            .finish()
    }
}

impl MultiGuard {
    /// The guards, in acquisition order.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    guard_calls!("every lock",
        fencing: "The token of the first lock (in acquisition order, by path). Each lock has its own tokens, comparable only with that lock's: pass each store the token of the lock that protects it, from [`tokens`](Self::tokens) or [`guards`](Self::guards).");

    /// The locks' nodes, in acquisition order.
    fn nodes(&self) -> impl Iterator<Item = &Held> + Clone {
        self.guards.iter().map(|guard| &guard.held)
    }

    /// In reverse order.
    fn nodes_to_release(&mut self) -> Vec<&mut Held> {
        self.guards
            .iter_mut()
            .rev()
            .map(|guard| &mut guard.held)
            .collect()
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        // One bound for the whole drop, not one per lock.
        let Some(deadline) = self.guards.first().map(LockGuard::drop_deadline) else {
            return;
        };
        while let Some(mut guard) = self.guards.pop() {
            guard.release_on_drop(deadline);
        }
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.guards.iter().map(LockGuard::node_path))
            .finish()
    }
}
