//! A semaphore's lease, Curator's `InterProcessSemaphoreV2` way: not a queue with a blocker,
//! but a count of lease nodes that admits at most `permits`.

use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::session::listing::Children;
use crate::session::Session;
use crate::znode::layout::owner_data;

use super::claim::{claim, node_vanished};
use super::contend::{gave_up, past_deadline_is_busy, wait_for_change, Woken};
use super::held::Held;
use super::place::{create_node, Created};
use super::wait::{Attempt, Patience};
use super::withdraw::OurNode;

/// Takes one lease under `leases_path` of a semaphore with `permits` leases, Curator's
/// `InterProcessSemaphoreV2` way: create a lease node, then wait until at most `permits` lease
/// nodes exist. The caller serialises lease takers with the semaphore's internal mutex, so only
/// one of them watches the leases at a time.
pub(crate) async fn acquire_lease(
    session: &Arc<Session>,
    leases_path: &str,
    lease_name: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held>> {
    let taken = take_lease(session, leases_path, lease_name, permits, attempt, deadline).await;
    past_deadline_is_busy(session, deadline, taken)
}

/// The steps of [`acquire_lease`], whose errors it has yet to sort.
async fn take_lease(
    session: &Arc<Session>,
    leases_path: &str,
    lease_name: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held>> {
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
        return gave_up(session);
    };
    let admitted = |children: &[String], contender: &mut OurNode| {
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
            None => {
                let listed = Box::pin(session.list_with_stat_async(leases_path, deadline));
                let (names, stat) = listed.await?;
                Children::new(names, stat)
            }
        };
        if admitted(&listed.names, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        if let Patience::DontWait = attempt.patience {
            return Ok(None);
        }
        let watching = Box::pin(session.watch_children_async(leases_path, deadline));
        let (listed, watcher) = match watching.await {
            Ok(watched) => watched,
            Err(Error::ConnectionLoss) => return gave_up(session),
            Err(err) => return Err(err),
        };
        if admitted(&listed, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        drop(listed);
        let woken = wait_for_change(session, watcher, &mut contender, deadline).await?;
        if let Woken::TimedOut = woken {
            return gave_up(session);
        }
    }
}
