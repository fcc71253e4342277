//! The one rule that decides whether a lock is held: from the session's liveness, its lease
//! (on the monotonic clock of the calling thread) and, for a lock, the watch on our own node.
//!
//! Every reader asks [`decide`] and reads its [`Standing`] in its own terms: a guard as a
//! [`LockState`] (`state()`, `is_held()`, `lease_remaining()`, `wait_lost()`), the client as a
//! `SessionState` (`Client::state`, the state thread, its listener and the session metrics),
//! the loss counter as a cause (`track.rs`). So they cannot disagree about when a lock stops
//! being held.
//!
//! The states on the way, one per layer that needs its own: the transport's `KeeperState`
//! (what the protocol says: connected, disconnected, expired, auth failed, closed); the
//! session's [`Liveness`] (connected, disconnected or ended, also when the client was closed
//! or the process forked, which the protocol cannot know; the simulated session produces it
//! too); [`Standing`] here (the rule: the lease and our node's deletion added, and why a lock
//! was lost); and the two public readings of it, [`LockState`] and `SessionState`.

use std::time::Duration;

use crate::error::Error;

use super::session_view::Liveness;

/// Whether a held lock is still ours, as far as this process can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockState {
    /// Connected, session alive: the lock is held.
    Held,
    /// The connection is down or silent. The session may still be alive (the lock then comes
    /// back as `Held` on reconnect) or may be expiring, in which case another process can
    /// acquire the lock. Treat the lock as lost: stop touching the resource until `Held` again
    /// (Curator's rule for its SUSPENDED state).
    Suspended,
    /// The session expired or closed, or the node is gone: the lock is lost for good.
    Lost,
}

/// What this process can tell, now, about a node it holds through a session, or about the
/// session alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Connected, and the lease runs this much longer: the server cannot have expired the
    /// session before then.
    Held(Duration),
    /// In doubt. `connected: false`: the connection is down. `connected: true`: it looks alive,
    /// but the lease ran out (the server has not answered a write or sync sent in the last 2/3
    /// of the session timeout: a frozen process or a stalled network thread), so another
    /// process may hold the lock by now.
    Suspended { connected: bool },
    /// Lost for good.
    Lost(Loss),
}

/// Why a [`Standing::Lost`] lock is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    /// Someone else deleted our node.
    Deleted,
    /// The server expired the session.
    Expired,
    /// The session ended otherwise: the client was closed, the server refused its
    /// credentials, or this is a forked child of the process that opened it.
    Closed,
}

/// Why the locks of a session that ended with `error` (its `ended_error`) are lost.
pub(crate) fn ended(error: &Error) -> Loss {
    match error {
        Error::SessionExpired => Loss::Expired,
        _ => Loss::Closed,
    }
}

/// The rule itself, on what `Session::standing` reads: the lease (`lease_left`) and the end
/// (`ended`) are looked at only where they matter.
pub(crate) fn decide(
    deleted: bool,
    liveness: Liveness,
    lease_left: impl FnOnce() -> Option<Duration>,
    ended: impl FnOnce() -> Loss,
) -> Standing {
    if deleted {
        return Standing::Lost(Loss::Deleted);
    }
    match liveness {
        Liveness::Connected => match lease_left() {
            Some(left) => Standing::Held(left),
            None => Standing::Suspended { connected: true },
        },
        Liveness::Disconnected => Standing::Suspended { connected: false },
        Liveness::Ended => Standing::Lost(ended()),
    }
}

impl Standing {
    /// How much longer the holder can be sure it holds the lock; `None` unless held.
    pub(crate) fn lease(self) -> Option<Duration> {
        match self {
            Standing::Held(left) => Some(left),
            _ => None,
        }
    }
}

impl From<Standing> for LockState {
    fn from(standing: Standing) -> LockState {
        match standing {
            Standing::Held(_) => LockState::Held,
            Standing::Suspended { .. } => LockState::Suspended,
            Standing::Lost(_) => LockState::Lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEFT: Duration = Duration::from_secs(1);

    fn decided(deleted: bool, liveness: Liveness, lease: Option<Duration>) -> Standing {
        decide(deleted, liveness, || lease, || Loss::Expired)
    }

    #[test]
    fn held_only_while_connected_within_the_lease() {
        let held = decided(false, Liveness::Connected, Some(LEFT));
        assert_eq!(held, Standing::Held(LEFT));
        assert_eq!(LockState::from(held), LockState::Held);
        assert_eq!(held.lease(), Some(LEFT));
    }

    #[test]
    fn a_lease_run_out_on_a_live_connection_is_suspended_not_held() {
        // The network thread may be stalled and still say "connected": the lease decides.
        let stale = decided(false, Liveness::Connected, None);
        assert_eq!(stale, Standing::Suspended { connected: true });
        assert_eq!(LockState::from(stale), LockState::Suspended);
        assert_eq!(stale.lease(), None);
    }

    #[test]
    fn a_lost_connection_is_suspended_whatever_the_lease() {
        for lease in [Some(LEFT), None] {
            let down = decided(false, Liveness::Disconnected, lease);
            assert_eq!(down, Standing::Suspended { connected: false });
            assert_eq!(LockState::from(down), LockState::Suspended);
        }
    }

    #[test]
    fn an_ended_session_or_a_deleted_node_is_lost_with_its_cause() {
        let ended = decide(false, Liveness::Ended, || Some(LEFT), || Loss::Closed);
        assert_eq!(ended, Standing::Lost(Loss::Closed));
        for liveness in [Liveness::Connected, Liveness::Disconnected, Liveness::Ended] {
            let deleted = decided(true, liveness, Some(LEFT));
            assert_eq!(deleted, Standing::Lost(Loss::Deleted));
            assert_eq!(LockState::from(deleted), LockState::Lost);
        }
    }
}
