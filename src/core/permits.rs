//! A semaphore's lease, Curator's `InterProcessSemaphoreV2` way: not a queue with a blocker,
//! but a count of lease nodes that admits at most `permits`.

use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::session::Session;
use crate::znode::layout::owner_data;

use super::claim::{claim, node_vanished, Claimed};
use super::contend::{gave_up, past_deadline_is_busy, wait_for_change, Woken};
use super::held::Held;
use super::place::{create_node, Created};
use super::seam::ZkSession;
use super::wait::{Attempt, Patience};
use super::withdraw::OurNode;

/// Takes one lease under `leases_path` of a semaphore with `permits` leases, Curator's
/// `InterProcessSemaphoreV2` way: create a lease node, then wait until at most `permits` lease
/// nodes exist. The caller serialises lease takers with the semaphore's internal mutex, so only
/// one of them watches the leases at a time.
pub(crate) async fn acquire_permit_node(
    session: &Arc<Session>,
    leases_path: &str,
    lease_name: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held>> {
    let taken =
        take_permit_node(session, leases_path, lease_name, permits, attempt, deadline).await;
    let claimed = past_deadline_is_busy(session.as_ref(), deadline, taken)?;
    Ok(claimed.map(|claimed| claimed.held(leases_path)))
}

/// The steps of [`acquire_permit_node`], on any [`ZkSession`], whose errors it has yet to sort.
pub(crate) async fn take_permit_node<S: ZkSession>(
    session: &Arc<S>,
    leases_path: &str,
    lease_name: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Claimed<S>>> {
    let data = owner_data();
    let created = Box::pin(create_node(
        session,
        leases_path,
        lease_name,
        &data,
        attempt,
        deadline,
    ))
    .await?;
    let Some(Created {
        mut contender,
        name,
        stat,
        children,
        generation,
    }) = created
    else {
        return gave_up(session.as_ref());
    };
    let admitted = |children: &[String], contender: &mut OurNode<S>| {
        if children.contains(&name) {
            Ok(children.len() <= permits)
        } else {
            Err(node_vanished(contender, leases_path))
        }
    };
    let mut children = Some(children);
    loop {
        let listed = match children.take() {
            Some(children) => children,
            None => Box::pin(session.list_with_stat(leases_path, deadline)).await?,
        };
        if admitted(&listed.names, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        if let Patience::DontWait = attempt.patience {
            return Ok(None);
        }
        // Followed from before the watch is asked for (see `wait_for_change`).
        let states = session.states();
        let watching = Box::pin(session.watch_children(leases_path, deadline));
        let (listed, watcher) = match watching.await {
            Ok(watched) => watched,
            Err(Error::ConnectionLoss { .. }) => return gave_up(session.as_ref()),
            Err(err) => return Err(err),
        };
        if admitted(&listed, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        drop(listed);
        let woken =
            wait_for_change(session.as_ref(), states, watcher, &mut contender, deadline).await?;
        if let Woken::TimedOut = woken {
            return gave_up(session.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::sim::store::Store;

    #[test]
    fn a_lease_is_taken_once_a_lease_is_returned() {
        let store = Store::new("/leases");
        let other = store.add_other("lease-");
        let session = store.session.clone();
        let mut taking = Box::pin(async {
            let attempt = Attempt::forever();
            take_permit_node(&session, "/leases", "lease-", 1, &attempt, None).await
        });
        assert!(store.sim.poll(taking.as_mut()).is_none(), "waits");
        store.delete(&other);
        let claimed = store.sim.poll(taking.as_mut()).expect("done");
        let claimed = claimed.expect("no error").expect("taken");
        assert_eq!(claimed.node_path, format!("/leases/{}", store.ours()[0]));
    }
}
