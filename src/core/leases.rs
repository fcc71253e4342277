//! A semaphore's lease, Curator's `InterProcessSemaphoreV2` way: not a queue with a blocker,
//! but a count of lease nodes that admits at most `permits`.

use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::session::watch::Signal;
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
pub(crate) fn acquire_lease(
    session: &Arc<Session>,
    leases_path: &str,
    lease_name: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held>> {
    let taken = take_lease(session, leases_path, lease_name, permits, attempt, deadline);
    past_deadline_is_busy(session, deadline, taken)
}

/// The steps of [`acquire_lease`], whose errors it has yet to sort.
fn take_lease(
    session: &Arc<Session>,
    leases_path: &str,
    lease_name: &str,
    permits: usize,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held>> {
    let Some(Created {
        mut contender,
        name,
        stat,
        mut children,
        generation,
    }) = create_node(session, leases_path, lease_name, &owner_data(), deadline)?
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
    loop {
        let listed = match children.take() {
            Some(children) => children,
            None => session.list(leases_path, deadline)?,
        };
        if admitted(&listed, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        if let Patience::DontWait = attempt.patience {
            return Ok(None);
        }
        let signal = Signal::new();
        let (listed, watch) = match session.watch_children(leases_path, &signal, deadline) {
            Ok(watched) => watched,
            Err(Error::ConnectionLoss) => return gave_up(session),
            Err(err) => return Err(err),
        };
        if admitted(&listed, &mut contender)? {
            return claim(contender, leases_path, stat, generation).map(Some);
        }
        if let Woken::TimedOut = wait_for_change(session, &signal, &mut contender, deadline)? {
            return gave_up(session);
        }
        drop(watch);
    }
}
