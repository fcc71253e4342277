//! Transactions: several writes applied atomically by the server, all or none (the fenced
//! writes are made of them).

use std::time::Instant;

use log::{debug, warn};

use super::until;
use crate::error::{Error, Result};
use crate::wire as zk;

use super::errors::outcome_unknown;
use super::retry::RETRY_PAUSE;
use super::Session;

/// One operation of a transaction ([`Session::multi_async`]).
#[derive(Debug, Clone)]
pub(crate) enum TxnOp {
    /// Succeeds only if `path` exists and, if `version` is given, has that data version.
    Check {
        path: String,
        version: Option<i32>,
    },
    /// Creates a persistent node with the session's ACL.
    Create {
        path: String,
        data: Vec<u8>,
    },
    /// Creates an empty persistent node on the way to another, with the parent ACL (as
    /// [`Session::put_async`] does), so one identity's fenced write does not close a shared parent
    /// to the others.
    CreateParent {
        path: String,
    },
    SetData {
        path: String,
        data: Vec<u8>,
    },
    Delete {
        path: String,
    },
}

impl TxnOp {
    pub(crate) fn path(&self) -> &str {
        match self {
            TxnOp::Check { path, .. }
            | TxnOp::Create { path, .. }
            | TxnOp::CreateParent { path }
            | TxnOp::SetData { path, .. }
            | TxnOp::Delete { path } => path,
        }
    }
}

/// How a transaction ended, when the server answered or the request stayed unsent.
#[derive(Debug)]
pub(crate) enum TxnOutcome {
    /// Every operation was applied.
    Committed,
    /// The server refused operation `index` with `error` (typed for that operation's path);
    /// nothing of the transaction was applied.
    Refused { index: usize, error: Error },
    /// The request was sent but its reply was lost (connection dropped, or the deadline passed
    /// first): it may or may not have been applied, and one abandoned at the deadline may still
    /// be applied later, as the server finds the state then.
    Unknown,
}

impl Session {
    /// Sends `ops` as one ZooKeeper `multi`: the server applies all of them or none.
    ///
    /// Never resends a request that may have reached the server: only a throttled one (refused
    /// unexecuted). Blocks until a reply or `deadline`; the request is issued only once the
    /// session is connected, so [`Error::ConnectionLoss`] means nothing was sent. Other errors
    /// (session expired, client closed) are definite: nothing was applied.
    ///
    /// Dropped after the request was sent, its outcome stays unknown, as one abandoned at the
    /// deadline.
    pub(crate) async fn multi_async(
        &self,
        ops: &[TxnOp],
        deadline: Option<Instant>,
    ) -> Result<TxnOutcome> {
        let first_path = ops.first().map_or("", TxnOp::path);
        loop {
            // A request queued while disconnected would be sent whenever the connection
            // returns, long after the caller gave up: send only on a live connection.
            self.wait_connected_async(deadline).await?;
            let (zk, acl, parent_acl) = (self.zk()?, self.acl, self.parent_acl);
            let requests: Vec<zk::TxnRequest> = ops
                .iter()
                .map(|op| match op.clone() {
                    TxnOp::Check { path, version } => zk::TxnRequest::Check {
                        path,
                        version: version.unwrap_or(-1),
                    },
                    TxnOp::CreateParent { path } => zk::TxnRequest::Create {
                        path,
                        data: Vec::new(),
                        options: zk::CreateMode::Persistent.with_acls(parent_acl),
                    },
                    TxnOp::Create { path, data } => zk::TxnRequest::Create {
                        path,
                        data,
                        options: zk::CreateMode::Persistent.with_acls(acl.acls()),
                    },
                    TxnOp::SetData { path, data } => zk::TxnRequest::SetData {
                        path,
                        data,
                        version: -1,
                    },
                    TxnOp::Delete { path } => zk::TxnRequest::Delete { path, version: -1 },
                })
                .collect();
            // The request is on the wire when `multi` returns; the lease counts from before.
            let sent = Instant::now();
            let request = zk.multi(&requests);
            let outcome = until(request, deadline).await;
            if let Ok(Ok(_)) = &outcome {
                self.lease.renew(sent); // The leader ran (or refused) the transaction.
            }
            match outcome {
                Ok(Ok(None)) => return Ok(TxnOutcome::Committed),
                Ok(Ok(Some((index, source)))) => {
                    let path = ops.get(index).map_or(first_path, TxnOp::path);
                    return Ok(TxnOutcome::Refused {
                        index,
                        error: self.error(source, path),
                    });
                }
                Ok(Err(zk::Error::Throttled)) => {
                    debug!("transaction on {first_path} throttled by the server; retrying");
                    crate::rt::runtime::sleep(RETRY_PAUSE).await;
                }
                Ok(Err(source)) if outcome_unknown(&source) => {
                    warn!(
                        "transaction on {first_path} (session {:#x}) sent, reply lost: {source}",
                        self.id
                    );
                    return Ok(TxnOutcome::Unknown);
                }
                Ok(Err(source)) => return Err(self.error(source, first_path)),
                Err(_abandoned) => {
                    warn!("transaction on {first_path} (session {:#x}) unanswered at the deadline; it may still be applied", self.id);
                    return Ok(TxnOutcome::Unknown);
                }
            }
        }
    }
}
