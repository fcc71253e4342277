//! The public session state: [`Client::state`](crate::Client::state) decides it when called,
//! by the one rule that decides whether a lock is held (`core/standing.rs`), read for the
//! session alone.

use std::fmt;
use std::time::{Duration, Instant};

use crate::core::standing::{Loss, Standing};
use crate::rt::runtime::deadline_after;
use crate::session::Session;

/// The state of a [`Client`](crate::Client)'s ZooKeeper session, as [`Client::state`](crate::Client::state) decides it when called.
///
/// It follows the states of Curator's `ConnectionStateListener`: `Suspended` is the one to act
/// on (stop touching what your locks protect until `Connected` again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionState {
    /// Connected, and the server answered recently enough that it cannot have expired the
    /// session: the session's locks are held ([`LockState::Held`](crate::LockState::Held)).
    Connected,
    /// The connection is down, or the lease ran out: the server has not answered for 2/3 of
    /// the session timeout (see [`LockGuard::state`](crate::LockGuard::state)). The session
    /// may still be alive, and comes back `Connected` when the server answers again, or may be
    /// expiring. Locks held through it read
    /// [`LockState::Suspended`](crate::LockState::Suspended).
    Suspended,
    /// The server expired the session: every lock held through it is lost. The next call on
    /// the client (an acquisition, a read) opens a new session, and the state turns
    /// `Connected` again.
    Expired,
    /// The client cannot be used any more: [`Client::close`](crate::Client::close) was called (on any clone), or the
    /// server rejected its credentials ([`Error::AuthFailed`](crate::Error::AuthFailed)), or
    /// this is a forked child of the process that connected it. Final.
    Closed,
}

impl fmt::Display for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SessionState::Connected => "connected",
            SessionState::Suspended => "suspended",
            SessionState::Expired => "expired",
            SessionState::Closed => "closed",
        })
    }
}

/// A change of a client's [`SessionState`], as told to the listener registered with
/// [`ClientBuilder::on_state_change`](crate::ClientBuilder::on_state_change).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateChange {
    /// The state before.
    pub from: SessionState,
    /// The state now.
    pub to: SessionState,
    /// The session the new state is about (after an expiry, the new session once `to` is
    /// `Connected`).
    pub session_id: i64,
    /// How long the client had not been `Connected` when it becomes `Connected` again (how long
    /// it was out); otherwise how long the previous state lasted.
    pub after: Duration,
}

/// The state of `session`, decided now on the calling thread by the one rule (judged for the
/// session alone, no node of ours), with where it stands, for [`next_look`].
pub(crate) fn of_session(session: &Session) -> (SessionState, Standing) {
    let standing = session.standing(false);
    (standing.into(), standing)
}

impl From<Standing> for SessionState {
    fn from(standing: Standing) -> SessionState {
        match standing {
            Standing::Held(_) => SessionState::Connected,
            Standing::Suspended { .. } => SessionState::Suspended,
            Standing::Lost(Loss::Expired) => SessionState::Expired,
            // A session has no node of its own to lose (`Deleted` is a lock's).
            Standing::Lost(Loss::Closed | Loss::Deleted) => SessionState::Closed,
        }
    }
}

/// When to look again at a session that stands where `standing` says, if nothing is notified:
/// when the lease runs out; while suspended on a live connection (the lease ran out, a renewal
/// brings it back without any event), every [`LEASE_POLL`].
pub(crate) fn next_look(session: &Session, standing: Standing) -> Instant {
    match standing {
        Standing::Held(_) => session.lease.expiry(),
        Standing::Suspended { connected: true } => Instant::now() + LEASE_POLL,
        _ => deadline_after(Duration::MAX),
    }
}

/// How often a suspended session on a live connection is looked at again.
const LEASE_POLL: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_reads_the_one_rule_in_its_own_terms() {
        let left = Duration::from_secs(1);
        let read = |standing| SessionState::from(standing);
        assert_eq!(read(Standing::Held(left)), SessionState::Connected);
        for connected in [true, false] {
            assert_eq!(
                read(Standing::Suspended { connected }),
                SessionState::Suspended
            );
        }
        assert_eq!(read(Standing::Lost(Loss::Expired)), SessionState::Expired);
        assert_eq!(read(Standing::Lost(Loss::Closed)), SessionState::Closed);
    }
}
