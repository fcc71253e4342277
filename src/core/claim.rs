//! The end of a wait: our node holds the lock (checked to be our session's), or it vanished.

use crate::error::{Error, Result};
use crate::session::{Liveness, NodeStat};

use super::held::Held;
use super::withdraw::OurNode;

pub(super) fn claim(
    mut contender: OurNode,
    lock_path: &str,
    stat: NodeStat,
    generation: i64,
) -> Result<Held> {
    let session = contender.session.clone();
    // The node must belong to the session we hold it through (Curator once granted a lock on
    // a stale read that did not).
    if stat.ephemeral_owner != session.id {
        return Err(Error::LockLost {
            path: lock_path.to_owned(),
        });
    }
    contender.armed = false;
    let node_path = std::mem::take(&mut contender.node_path);
    Ok(Held::new(session, lock_path, node_path, stat, generation))
}

/// Our node is missing from the listing: only our session's end or someone deleting it by
/// hand removes it.
pub(super) fn node_vanished(contender: &mut OurNode, lock_path: &str) -> Error {
    contender.armed = false;
    match contender.session.liveness() {
        Liveness::Ended => Error::SessionExpired,
        _ => Error::LockLost {
            path: lock_path.to_owned(),
        },
    }
}
