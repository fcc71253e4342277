//! The end of a wait: our node holds the lock (checked to be our session's), or it vanished.

use std::sync::Arc;

use crate::error::{Error, Result};

use super::seam::ZkSession;
use super::session_view::{Liveness, NodeStat};
use super::withdraw::OurNode;

/// Our node, claimed: it holds the lock. On a session of the client, `Claimed::held` (in
/// `held.rs`) makes it the `Held` a guard keeps; the in-memory tests look at it as it is.
pub(crate) struct Claimed<S: ZkSession> {
    pub(crate) session: Arc<S>,
    pub(crate) node_path: String,
    pub(crate) stat: NodeStat,
    pub(crate) generation: i64,
}

pub(super) fn claim<S: ZkSession>(
    mut contender: OurNode<S>,
    lock_path: &str,
    stat: NodeStat,
    generation: i64,
) -> Result<Claimed<S>> {
    // The node must belong to the session we hold it through (Curator once granted a lock on
    // a stale read that did not).
    if stat.ephemeral_owner != contender.session.id() {
        return Err(Error::LockLost {
            path: lock_path.to_owned(),
        });
    }
    contender.armed = false;
    let node_path = std::mem::take(&mut contender.node_path);
    Ok(Claimed {
        session: contender.session.clone(),
        node_path,
        stat,
        generation,
    })
}

/// Our node is missing from the listing: only our session's end or someone deleting it by
/// hand removes it.
pub(super) fn node_vanished<S: ZkSession>(contender: &mut OurNode<S>, lock_path: &str) -> Error {
    contender.armed = false;
    match contender.session.liveness() {
        Liveness::Ended => Error::SessionExpired,
        _ => Error::LockLost {
            path: lock_path.to_owned(),
        },
    }
}
