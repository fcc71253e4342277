//! Fenced writes: ZooKeeper writes that the server applies only while our lock node exists.
//!
//! Every write is one `multi` whose first operation checks our lock node. The server executes
//! a transaction atomically and in its one global order, and it deletes our node (release,
//! expiry, an operator's break) before any other contender can acquire the lock. So a fenced
//! write is either applied before the next holder acquired, or refused: a holder that was paused
//! (GC, SIGSTOP), partitioned or expired can no longer overwrite what its successor wrote.
//!
//! The check is made by the server, never locally: the transaction goes through the client's
//! *current* session, so even a guard whose session has expired, and whose client has opened a
//! new one since, gets its write refused by the server rather than by a flag in this process.
//!
//! Which condition to check. Curator's `Revoker` asks a holder to let go by writing into the
//! holder's node, which bumps the node's data version; a check on the version we knew would
//! make every fenced write fail after a revocation request, although the lock is still ours.
//! So the check is on existence (version -1). That is as strong: our node's name embeds a
//! random uuid and a server-assigned sequence number, so once it is gone no contender
//! (zklock's or Curator's) ever creates that name again; only a hand-made `create` of that exact
//! name could, and a version check would not catch that either (a fresh node has version 0,
//! like ours before any revocation request).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use log::debug;

use crate::client::Client;
use crate::core::wait::Wait;
use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::deadline_after;
use crate::session::txn::{TxnOp, TxnOutcome};
use crate::session::Session;
use crate::znode::layout::check_data_size;
use crate::znode::path::{parent, validate_lock_path};

/// How many times [`Fence::set_data`] switches between updating and creating while `path` keeps
/// appearing and disappearing under it (each switch follows a definite refusal, so nothing was
/// applied) before giving up with [`Error::NodeChanged`].
const FORM_SWITCHES: u32 = 8;

/// What a transaction may carry in all: ZooKeeper drops the connection of a request larger
/// than `jute.maxbuffer` (1 MiB by default), which would look like an outage with an unknown
/// outcome. This leaves room for the request headers.
const MAX_TXN_BYTES: usize = 1_040_000;

/// Room for one operation's header, ACL and length fields in [`MAX_TXN_BYTES`].
const OP_OVERHEAD: usize = 128;

/// How long a fenced write may take and what stops it: the session timeout from the call
/// (as every one-off call), or less as a [`Wait`] says.
pub(crate) struct Bound<'w> {
    deadline: Instant,
    /// What the deadline allows, named in an [`Error::ConnectionLoss`].
    timeout: Duration,
    cancel: Option<&'w CancelToken>,
    /// Set once the write may have reached the server: from then on, stopping it leaves its
    /// outcome unknown, and that is what the caller is told.
    sent: AtomicBool,
}

impl<'w> Bound<'w> {
    /// The bound of the plain calls: the session timeout.
    pub(crate) fn call(client: &Client) -> Bound<'static> {
        let timeout = client.call_timeout();
        Bound {
            deadline: deadline_after(timeout),
            timeout,
            cancel: None,
            sent: AtomicBool::new(false),
        }
    }

    /// The bound of the `_with` calls: `wait`'s timeout and token, and never past the
    /// session timeout (a write cannot wait longer than the plain call).
    pub(crate) fn with(client: &Client, wait: &'w Wait) -> Bound<'w> {
        let call = client.call_timeout();
        let (deadline, timeout) = match wait.resolve() {
            Some((deadline, allowed)) if allowed < call => (deadline, allowed),
            _ => (deadline_after(call), call),
        };
        Bound {
            deadline,
            timeout,
            cancel: wait.cancel_token(),
            sent: AtomicBool::new(false),
        }
    }
}

/// The lock node a fenced write is conditioned on, and the client whose current session sends
/// it.
#[derive(Clone, Copy)]
pub(crate) struct Fence<'a> {
    pub(crate) client: &'a Client,
    pub(crate) node_path: &'a str,
}

impl Fence<'_> {
    fn lost(&self) -> Error {
        Error::LockLost {
            path: lock_path_of(self.node_path).to_owned(),
        }
    }

    /// An ended session is a lost lock: if it was our node's session, the node went with it;
    /// if it was a later one, our node's session had ended before.
    fn expired_is_lost(&self, err: Error) -> Error {
        match err {
            Error::SessionExpired => self.lost(),
            other => other,
        }
    }

    fn check(&self) -> TxnOp {
        TxnOp::Check {
            path: self.node_path.to_owned(),
            version: None,
        }
    }

    /// Runs `write` within `bound`: a cancel of its token stops it with
    /// [`Error::Cancelled`] before anything was sent, and with [`Error::OutcomeUnknown`]
    /// (naming `path`) once something may have been; an outage is named with the bound.
    async fn bounded<T>(
        &self,
        bound: &Bound<'_>,
        path: &str,
        write: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let outcome = match bound.cancel {
            None => write.await,
            // Nothing sent for a token cancelled before the call.
            Some(cancel) if cancel.is_cancelled() => Err(Error::Cancelled),
            Some(cancel) => {
                let mut write = std::pin::pin!(write);
                let mut stop = std::pin::pin!(cancel.cancelled_error());
                std::future::poll_fn(|cx| {
                    if let Poll::Ready(outcome) = write.as_mut().poll(cx) {
                        return Poll::Ready(outcome);
                    }
                    stop.as_mut().poll(cx).map(|err| {
                        if bound.sent.load(Ordering::SeqCst) {
                            // The request goes on without us: never reported as not applied.
                            debug!("fenced write to {path} cancelled after it was sent");
                            Err(Error::OutcomeUnknown {
                                path: path.to_owned(),
                            })
                        } else {
                            Err(err)
                        }
                    })
                })
                .await
            }
        };
        outcome.map_err(|err| self.client.outage(err, path, Some(bound.timeout)))
    }

    /// Sends `ops` behind the check of our node, through the client's current session.
    /// `Ok(Err((index, error)))`: the server refused write `index` (counted without the check);
    /// nothing was applied.
    async fn commit(
        &self,
        session: &Session,
        ops: Vec<TxnOp>,
        unknown_path: &str,
        bound: &Bound<'_>,
    ) -> Result<Result<(), (usize, Error)>> {
        let deadline = Some(bound.deadline);
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(self.check());
        all.extend(ops);
        // Waited for here as well as in `multi_async`, so that a stop before this point is
        // known to have sent nothing.
        if let Err(err) = session.wait_connected_async(deadline).await {
            return Err(self.expired_is_lost(err));
        }
        bound.sent.store(true, Ordering::SeqCst);
        match session.multi_async(&all, deadline).await {
            Ok(TxnOutcome::Committed) => Ok(Ok(())),
            // Our node is gone: the lock was lost, and nothing was written.
            Ok(TxnOutcome::Refused { index: 0, error }) => {
                debug!("fenced write refused: {} is gone ({error})", self.node_path);
                Err(self.lost())
            }
            Ok(TxnOutcome::Refused { index, error }) => Ok(Err((index - 1, error))),
            // Resending could apply the write twice, or after another write of ours; and no
            // read can tell our write from an identical one by someone else. The caller decides.
            Ok(TxnOutcome::Unknown) => Err(Error::OutcomeUnknown {
                path: unknown_path.to_owned(),
            }),
            // Definite: nothing was applied, and the session that sent it has ended.
            Err(err) => Err(self.expired_is_lost(err)),
        }
    }

    /// See [`LockGuard::fenced_set_data`](crate::LockGuard::fenced_set_data).
    pub(crate) async fn set_data(&self, path: &str, data: &[u8], bound: &Bound<'_>) -> Result<()> {
        validate_lock_path(path)?;
        check_data_size(data)?;
        self.bounded(bound, path, self.write_data(path, data, bound))
            .await
    }

    /// [`set_data`](Self::set_data), unbounded by the token.
    async fn write_data(&self, path: &str, data: &[u8], bound: &Bound<'_>) -> Result<()> {
        let deadline = Some(bound.deadline);
        // `None`: update `path`; `Some(parents)`: create it, after its missing `parents`.
        let mut create: Option<Vec<String>> = None;
        for _ in 0..FORM_SWITCHES {
            let session = self.client.session_async(deadline).await?;
            let ops = match &create {
                None => vec![TxnOp::SetData {
                    path: path.to_owned(),
                    data: data.to_vec(),
                }],
                Some(parents) => parents
                    .iter()
                    .map(|p| TxnOp::CreateParent { path: p.clone() })
                    .chain([TxnOp::Create {
                        path: path.to_owned(),
                        data: data.to_vec(),
                    }])
                    .collect(),
            };
            let target = ops.len() - 1;
            // Many missing parents of a long path could outgrow one request.
            check_txn_size(&ops)?;
            match self.commit(&session, ops, path, bound).await? {
                Ok(()) => return Ok(()),
                // No node to update: create it (and its missing parents) instead.
                Err((_, Error::NoNode { .. })) if create.is_none() => {
                    create = Some(self.missing_parents(&session, path, deadline).await?);
                }
                // Created by someone else meanwhile: update it instead.
                Err((index, err)) if index == target && is_node_exists(&err) => create = None,
                // A parent appeared or vanished meanwhile: look again.
                Err((_, err)) if is_node_exists(&err) || matches!(err, Error::NoNode { .. }) => {
                    create = Some(self.missing_parents(&session, path, deadline).await?);
                }
                Err((_, err)) => return Err(err),
            }
        }
        Err(Error::NodeChanged {
            path: path.to_owned(),
        })
    }

    async fn missing_parents(
        &self,
        session: &Session,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Vec<String>> {
        missing_parents(session, path, deadline)
            .await
            .map_err(|err| self.expired_is_lost(err))
    }

    /// See [`LockGuard::fenced_delete`](crate::LockGuard::fenced_delete).
    pub(crate) async fn delete(&self, path: &str, bound: &Bound<'_>) -> Result<bool> {
        validate_lock_path(path)?;
        let deleted = async {
            let session = self.client.session_async(Some(bound.deadline)).await?;
            let ops = vec![TxnOp::Delete {
                path: path.to_owned(),
            }];
            match self.commit(&session, ops, path, bound).await? {
                Ok(()) => Ok(true),
                Err((_, Error::NoNode { .. })) => Ok(false),
                Err((_, err)) => Err(err),
            }
        };
        self.bounded(bound, path, deleted).await
    }

    /// See [`FencedTransaction::commit`].
    async fn transaction(&self, ops: Vec<TxnOp>, bound: &Bound<'_>) -> Result<()> {
        let unknown_path = ops.first().map_or(self.node_path, TxnOp::path).to_owned();
        let committed = async {
            let session = self.client.session_async(Some(bound.deadline)).await?;
            self.commit(&session, ops, &unknown_path, bound)
                .await?
                .map_err(|(_, err)| err)
        };
        self.bounded(bound, &unknown_path, committed).await
    }
}

/// The lock path of a lock node (its parent).
fn lock_path_of(node_path: &str) -> &str {
    parent(node_path).unwrap_or(node_path)
}

fn is_node_exists(err: &Error) -> bool {
    matches!(err, Error::NodeExists { .. })
}

/// The ancestors of `path`, nearest the root first (the root excluded).
fn ancestors(path: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut at = path;
    while let Some(up) = parent(at) {
        found.push(up);
        at = up;
    }
    found.reverse();
    found
}

/// The ancestors of `path` that do not exist, nearest the root first. They are created in the
/// same transaction as `path`, behind the same check, so a stale holder creates nothing at all.
async fn missing_parents(
    session: &Session,
    path: &str,
    deadline: Option<Instant>,
) -> Result<Vec<String>> {
    let mut missing = Vec::new();
    // Walk up from the nearest: usually it exists and one read settles it.
    for ancestor in ancestors(path).into_iter().rev() {
        if session.exists_async(ancestor, deadline).await? {
            break;
        }
        missing.push(ancestor.to_owned());
    }
    missing.reverse();
    Ok(missing)
}

/// The request size of `ops` against [`MAX_TXN_BYTES`], checked before anything is sent.
fn check_txn_size(ops: &[TxnOp]) -> Result<()> {
    let bytes: usize = ops
        .iter()
        .map(|op| {
            let data = match op {
                TxnOp::Create { data, .. } | TxnOp::SetData { data, .. } => data.len(),
                TxnOp::Check { .. } | TxnOp::Delete { .. } | TxnOp::CreateParent { .. } => 0,
            };
            op.path().len() + data + OP_OVERHEAD
        })
        .sum();
    if bytes > MAX_TXN_BYTES {
        return Err(Error::InvalidArgument(
            "a fenced transaction carries more than ZooKeeper accepts in one request (about 1,000,000 bytes of paths and data)",
        ));
    }
    Ok(())
}

/// Several writes applied atomically, all or none, and only while the lock is held; made by
/// [`LockGuard::transaction`](crate::LockGuard::transaction).
///
/// The operations are applied in the order they were added, as one ZooKeeper `multi` whose
/// first operation checks that our lock node still exists (see
/// [`LockGuard::fenced_set_data`](crate::LockGuard::fenced_set_data) for what that guarantees).
/// Each is literal: [`create`](Self::create) fails if the node exists or its parent does not,
/// [`set_data`](Self::set_data) and [`delete`](Self::delete) fail if the node does not exist;
/// if any fails, nothing is applied.
///
/// Invalid input (a bad path, data over 1,000,000 bytes, a transaction larger than one
/// request may be) is reported by [`commit`](Self::commit), before anything is sent.
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// # let client = zklock::Client::connect("127.0.0.1:2181")?;
/// # let mutex = zklock::DistributedMutex::new(&client, "/locks/orders")?;
/// let guard = mutex.lock()?;
/// guard
///     .transaction()
///     .create("/orders/1042", b"pending")
///     .set_data("/orders/next-id", b"1043")
///     .delete("/orders/draft-1042")
///     .commit()?;
/// # Ok(()) }
/// ```
#[must_use = "nothing is written until `commit` is called"]
pub struct FencedTransaction<'a> {
    fence: Fence<'a>,
    ops: Vec<TxnOp>,
    /// The first invalid input, reported by `commit`.
    invalid: Option<Error>,
}

impl<'a> FencedTransaction<'a> {
    pub(crate) fn new(fence: Fence<'a>) -> Self {
        FencedTransaction {
            fence,
            ops: Vec::new(),
            invalid: None,
        }
    }

    fn push(mut self, path: &str, data: Option<&[u8]>, op: TxnOp) -> Self {
        if self.invalid.is_none() {
            let valid =
                validate_lock_path(path).and_then(|()| data.map_or(Ok(()), check_data_size));
            match valid {
                Ok(()) => self.ops.push(op),
                Err(err) => self.invalid = Some(err),
            }
        }
        self
    }

    /// Adds the creation of a persistent node at `path` holding `data`. Its parent must exist
    /// (or be created by an earlier operation of this transaction).
    pub fn create(self, path: &str, data: &[u8]) -> Self {
        let op = TxnOp::Create {
            path: path.to_owned(),
            data: data.to_vec(),
        };
        self.push(path, Some(data), op)
    }

    /// Adds a write of `data` into the existing node at `path` (whatever its version).
    pub fn set_data(self, path: &str, data: &[u8]) -> Self {
        let op = TxnOp::SetData {
            path: path.to_owned(),
            data: data.to_vec(),
        };
        self.push(path, Some(data), op)
    }

    /// Adds the deletion of the existing node at `path` (whatever its version; it must have no
    /// children).
    pub fn delete(self, path: &str) -> Self {
        let op = TxnOp::Delete {
            path: path.to_owned(),
        };
        self.push(path, None, op)
    }

    /// The number of operations added so far (the lock check not counted).
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// `true` if no operation was added: committing then only asks the server whether our lock
    /// node still exists.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Applies every operation, atomically, if and only if our lock node still exists when
    /// the server executes the transaction.
    ///
    /// Blocks for one round trip, waiting for a lost connection to return for at most the
    /// session timeout (from the call; a replacement for an expired session is opened within
    /// the same bound). Never resent after a lost reply.
    ///
    /// # Errors
    /// Before anything is sent: [`Error::InvalidPath`], [`Error::InvalidArgument`] (data or
    /// transaction too large). Nothing applied: [`Error::LockLost`] if our node is gone (the
    /// server refused the transaction; also when the session expired);
    /// [`Error::NoNode`] (naming the path) if a `set_data` or `delete` target, or a `create`
    /// target's parent, does not exist; [`Error::NodeExists`] if a `create`
    /// target exists, [`Error::NotEmpty`] if a `delete` target has children; [`Error::EphemeralParent`],
    /// [`Error::NoAuth`]; [`Error::ConnectionLoss`] if the connection did not return in time
    /// (the transaction was not sent); [`Error::Closed`]. Outcome unknown:
    /// [`Error::OutcomeUnknown`] (naming the first operation's path) if the connection failed
    /// after the transaction was sent: it may have been applied, but only if our node existed
    /// when it was.
    pub fn commit(self) -> Result<()> {
        let (client, bound) = (self.fence.client, Bound::call(self.fence.client));
        client.blocking(self.commit_within(&bound))
    }

    /// As [`commit`](Self::commit), blocking at most about `timeout` (monotonic clock, from
    /// the call; never longer than `commit`'s bound). Same as
    /// [`commit_with(Wait::timeout(timeout))`](Self::commit_with).
    ///
    /// # Errors
    /// As [`commit_with`](Self::commit_with).
    pub fn commit_timeout(self, timeout: std::time::Duration) -> Result<()> {
        self.commit_with(Wait::timeout(timeout))
    }

    /// As [`commit`](Self::commit), waiting as `wait` says: its timeout (never longer than
    /// `commit`'s own bound, the session timeout) and its [`CancelToken`].
    /// What the caller learns depends on whether the transaction had left:
    /// - not sent yet (the connection down, or waiting for it): [`Error::ConnectionLoss`]
    ///   naming the timeout once it passes, [`Error::Cancelled`] once the token is cancelled
    ///   (at once if it already is). Nothing was applied.
    /// - sent: [`Error::OutcomeUnknown`] once the timeout passes or the token is cancelled
    ///   before the reply. It may still be applied, but only while our node exists. It is
    ///   never resent: decide by reading back under the lock.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// # let guard = zklock::DistributedMutex::new(&client, "/locks/orders")?.lock()?;
    /// use std::time::Duration;
    /// use zklock::{Error, Wait};
    /// let shutdown = zklock::CancelToken::new();
    /// let wait = Wait::timeout(Duration::from_millis(300)).cancel_on(&shutdown);
    /// match guard.transaction().set_data("/orders/next-id", b"1043").commit_with(wait) {
    ///     Ok(()) => {}
    ///     // Nothing applied: safe to retry (while the lock is held) or give up.
    ///     Err(Error::ConnectionLoss { .. } | Error::Cancelled | Error::LockLost { .. }) => {}
    ///     // Maybe applied: read back under the lock before doing anything else.
    ///     Err(Error::OutcomeUnknown { path }) => eprintln!("{path}: outcome unknown"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`commit`](Self::commit), plus [`Error::Cancelled`].
    pub fn commit_with(self, wait: Wait) -> Result<()> {
        let (client, bound) = (self.fence.client, Bound::with(self.fence.client, &wait));
        client.blocking(self.commit_within(&bound))
    }

    /// As [`commit`](Self::commit), as a future. Dropped after the transaction was sent, its
    /// outcome stays unknown (as [`Error::OutcomeUnknown`] would say): it may be applied, but
    /// only while our node exists.
    ///
    /// # Errors
    /// As [`commit`](Self::commit).
    pub async fn commit_async(self) -> Result<()> {
        let bound = Bound::call(self.fence.client);
        self.commit_within(&bound).await
    }

    /// As [`commit_with`](Self::commit_with), as a future (the timeout on zklock's own
    /// timer). Dropped after the transaction was sent, its outcome stays unknown, as
    /// [`commit_async`](Self::commit_async)'s.
    ///
    /// # Errors
    /// As [`commit_with`](Self::commit_with).
    pub async fn commit_with_async(self, wait: Wait) -> Result<()> {
        let bound = Bound::with(self.fence.client, &wait);
        self.commit_within(&bound).await
    }

    async fn commit_within(self, bound: &Bound<'_>) -> Result<()> {
        if let Some(err) = self.invalid {
            return Err(err);
        }
        check_txn_size(&self.ops)?;
        self.fence.transaction(self.ops, bound).await
    }
}

impl std::fmt::Debug for FencedTransaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedTransaction")
            .field("lock_node", &self.fence.node_path)
            .field(
                "ops",
                &self
                    .ops
                    .iter()
                    .map(|op| match op {
                        TxnOp::Check { path, .. } => format!("check {path}"),
                        TxnOp::Create { path, .. } | TxnOp::CreateParent { path } => {
                            format!("create {path}")
                        }
                        TxnOp::SetData { path, .. } => format!("set_data {path}"),
                        TxnOp::Delete { path } => format!("delete {path}"),
                    })
                    .collect::<Vec<_>>(),
            )
            .field("invalid", &self.invalid)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::znode::layout::MAX_NODE_DATA;

    #[test]
    fn ancestors_nearest_root_first() {
        assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
        assert!(ancestors("/a").is_empty());
    }

    #[test]
    fn lock_path_is_the_node_parent() {
        assert_eq!(lock_path_of("/locks/x/_c_1-lock-0000000001"), "/locks/x");
    }

    #[test]
    fn transaction_size_is_bounded() {
        let set = |n| TxnOp::SetData {
            path: "/a".into(),
            data: vec![0; n],
        };
        assert!(check_txn_size(&[set(MAX_NODE_DATA)]).is_ok());
        assert!(matches!(
            check_txn_size(&[set(MAX_NODE_DATA), set(100_000)]),
            Err(Error::InvalidArgument(_))
        ));
        let deletes: Vec<_> = (0..8_000)
            .map(|i| TxnOp::Delete {
                path: format!("/{i:0>100}"),
            })
            .collect();
        assert!(check_txn_size(&deletes).is_err());
    }
}
