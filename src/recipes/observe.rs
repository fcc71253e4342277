//! [`LeaderWatch`]: following an election's leader from outside the queue
//! ([`LeaderElection::observe`](crate::LeaderElection::observe)).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::core::kind::Role;
use crate::core::wait::Wait;
use crate::error::{Error, Result};
use crate::rt::cancel::{self, CancelToken};
use crate::session::follow::{Head, Woke};
use crate::session::Session;

use super::catalogue::LATCH;
use super::inspect::Contender;

/// A change of an election's leader, as [`LeaderWatch`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderChange {
    /// The leader now (its node, with `holds` true), or `None` when nobody participates.
    pub leader: Option<Contender>,
}

/// Follows an election's leader: each call of [`next`](Self::next) (or
/// [`next_async`](Self::next_async)) returns the leader once it differs from the one returned
/// before; the first call returns the current leader at once. Made by
/// [`LeaderElection::observe`](crate::LeaderElection::observe).
///
/// Observing is reading: it joins no queue, creates no node and needs no permission but READ,
/// so a participant queued in [`participate`](crate::LeaderElection::participate) (on this
/// client or any other) keeps its place while another thread or task observes. Between
/// calls nothing is watched; during a call one watch is armed on the server, chosen to fire
/// only when the leader may have changed (a data watch on the leader's node, which fires when
/// the leader steps down, its session dies or an operator deletes its node; with no leader, a
/// child watch on the election path, or on its nearest existing ancestor while the path does
/// not exist). There is no polling. A change of the leader's data (a revocation request) is
/// no change of leader.
///
/// A leader is told apart by its node (name and creation zxid): a process that steps down and
/// joins again is a new leader. Changes that happen while no call is waiting are coalesced:
/// the next call reports the leader as it is then, once.
///
/// Connection losses are survived: the transport re-arms the watch on the server it
/// reconnects to (and the server fires it if the node changed meanwhile), and the leader is
/// read again after every reconnect in any case. The watch follows the session of its first
/// call: once that session has ended, every call returns its error
/// ([`Error::SessionExpired`], [`Error::Closed`]); observe again to follow on the client's
/// new session.
///
/// Dropping a call's future (or timing it out) at any await point removes its watch from the
/// server; the `LeaderWatch` itself holds nothing on the server.
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// # let client = zklock::Client::connect("127.0.0.1:2181")?;
/// let election = zklock::LeaderElection::new(&client, "/services/indexer/leader")?;
/// let mut leaders = election.observe();
/// loop {
///     match leaders.next()?.leader {
///         Some(leader) => println!("leader: {} (node {})", leader.owner, leader.node_name),
///         None => println!("no leader"),
///     }
/// }
/// # }
/// ```
pub struct LeaderWatch {
    client: Client,
    path: String,
    /// The session followed, from the first call on.
    session: Option<Arc<Session>>,
    /// The leader last returned (node name and creation zxid); `None` before the first call.
    last: Option<Option<(String, i64)>>,
}

impl LeaderWatch {
    pub(crate) fn new(client: &Client, path: &str) -> LeaderWatch {
        LeaderWatch {
            client: client.clone(),
            path: path.to_owned(),
            session: None,
            last: None,
        }
    }

    /// The election path observed.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Blocks until the leader differs from the one this watch returned last, and returns the
    /// new one; the first call returns the current leader after a few round trips. Waits as
    /// long as it takes, through connection losses.
    ///
    /// Never call it on an async runtime's worker thread: use [`next_async`](Self::next_async).
    ///
    /// # Errors
    /// [`Error::SessionExpired`] once the session followed has ended,
    /// [`Error::Closed`] once the client is closed (promptly, also while waiting),
    /// [`Error::NoAuth`] if the election path may not be read, and other server errors.
    // Not `Iterator::next`: it blocks, and a session's end is an error, not the end of a
    // sequence; the name follows the other calls' grid (`next_timeout`, `next_async`, ...).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<LeaderChange> {
        crate::session::blocking(self.next_until(None, None))
            .and_then(crate::core::wait::never_gives_up)
    }

    /// As [`next`](Self::next), giving up after `timeout` (monotonic clock, from the call):
    /// `Ok(None)` then, if the leader did not change. The timeout holds during outages too: a
    /// connection still down when it passes is [`Error::ConnectionLoss`].
    ///
    /// # Errors
    /// As [`next`](Self::next), plus [`Error::ConnectionLoss`].
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<LeaderChange>> {
        self.next_with(Wait::timeout(timeout))
    }

    /// As [`next`](Self::next), waiting as `wait` says: `Ok(None)` once its timeout has
    /// passed, [`Error::Cancelled`] once its token is cancelled (at once if it already is).
    ///
    /// # Errors
    /// As [`next_timeout`](Self::next_timeout), plus [`Error::Cancelled`].
    pub fn next_with(&mut self, wait: Wait) -> Result<Option<LeaderChange>> {
        let deadline = wait.deadline();
        crate::session::blocking(self.next_until(deadline, wait.cancel_token()))
    }

    /// As [`next`](Self::next), as a future (`Send`, any executor). Cancel safe: dropping it
    /// at any await point removes the watch it armed, and the next call reads the leader
    /// again (a change it had seen but not returned is returned then). Bound it with a
    /// runtime's timeout, or race it (`select!`).
    ///
    /// # Errors
    /// As [`next`](Self::next).
    pub async fn next_async(&mut self) -> Result<LeaderChange> {
        self.next_until(None, None)
            .await
            .and_then(crate::core::wait::never_gives_up)
    }

    /// As [`next_with`](Self::next_with), as a future: the timeout is measured by zklock's
    /// own timer, on any executor. Cancel safe, as [`next_async`](Self::next_async).
    ///
    /// # Errors
    /// As [`next_with`](Self::next_with).
    pub async fn next_with_async(&mut self, wait: Wait) -> Result<Option<LeaderChange>> {
        let deadline = wait.deadline();
        self.next_until(deadline, wait.cancel_token()).await
    }

    /// The one wait behind every form: the next change, `None` at `deadline`; stopped by
    /// `cancel` ([`Error::Cancelled`]) and by the client's closing ([`Error::Closed`]).
    async fn next_until(
        &mut self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<LeaderChange>> {
        if cancel.is_some_and(CancelToken::is_cancelled) && !self.client.is_closed() {
            return Err(Error::Cancelled);
        }
        let client = self.client.clone();
        let path = self.path.clone();
        let tokens: Vec<CancelToken> = cancel.into_iter().cloned().collect();
        let mut follow = std::pin::pin!(self.follow(deadline));
        let mut stop = std::pin::pin!(cancel::first_cancelled(&tokens));
        let raced = client.unless_closed(std::future::poll_fn(|cx| {
            use std::future::Future;
            if let std::task::Poll::Ready(outcome) = follow.as_mut().poll(cx) {
                return std::task::Poll::Ready(outcome);
            }
            stop.as_mut().poll(cx).map(Err)
        }));
        raced.await.map_err(|err| client.outage(err, &path, None))
    }

    /// Reads the leader until it differs from the last one returned, waiting on the watch
    /// between reads.
    async fn follow(&mut self, deadline: Option<Instant>) -> Result<Option<LeaderChange>> {
        let session = match &self.session {
            Some(session) => session.clone(),
            None => {
                let session = Box::pin(self.client.session_async(deadline)).await?;
                self.session = Some(session.clone());
                session
            }
        };
        let names = LATCH.lock_names();
        loop {
            if session.liveness() == crate::session::Liveness::Ended {
                return Err(session.ended_error());
            }
            let (head, watch) = Box::pin(session.head_async(&self.path, &names, deadline)).await?;
            let leader = head.map(leader_of);
            let id = leader.as_ref().map(|c| (c.node_name.clone(), c.zxid));
            if self.last.as_ref() != Some(&id) {
                log::debug!(
                    "leader of {} is now {}",
                    self.path,
                    id.as_ref().map_or("nobody", |(name, _)| name.as_str())
                );
                self.last = Some(id);
                return Ok(Some(LeaderChange { leader }));
            }
            match session.head_changed_async(watch, deadline).await? {
                Woke::Fired | Woke::Reconnected => {}
                // Not an acquisition: no change of leader before the deadline, whatever
                // the connection.
                Woke::Elapsed(_) => return Ok(None),
            }
        }
    }
}

/// The leader as inspection shows it.
fn leader_of(head: Head) -> Contender {
    let (data, stat) = head.data;
    Contender {
        node_name: head.node.name,
        role: Role::Participant,
        sequence: head.node.sequence,
        session_id: stat.ephemeral_owner,
        owner: String::from_utf8_lossy(&data).into_owned(),
        created_ms: stat.ctime,
        zxid: stat.czxid,
        version: stat.version,
        holds: true,
    }
}

impl fmt::Debug for LeaderWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderWatch")
            .field("path", &self.path)
            .field("last", &self.last)
            .finish()
    }
}
