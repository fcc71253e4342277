//! Listings of a lock path shared by the waiters of one session.
//!
//! After a reconnect every waiter on the session wakes and looks at the queue again; when many
//! tasks of one process queue at once, each needs a listing that shows its new node. Were each
//! to list the lock path itself, N waiters would fetch N listings of an N-node queue: O(N²)
//! bytes from the server in one burst (gigabytes for ten thousand tasks). Instead one lists,
//! and the others that need a listing sent no earlier than the one in flight join it; those
//! that need a later one join the next, which is sent as soon as the one in flight is
//! answered. So at most two listings of a path are in flight per session.
//!
//! Joining a listing is safe whenever it was sent after the event the joiner wakes for (the
//! caller says from when: `since`), and even a somewhat older one is: it was sent after the
//! joiner's own node was created (the joiner was already waiting), so it contains that node,
//! and the nodes ahead of ours only ever go away (sequence numbers only grow), so an older
//! listing shows at most more of them, never fewer. A waiter never claims the lock from it
//! wrongly; at worst it watches a node that is gone already and lists again.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use event_listener::Event;
use parking_lot::Mutex;

use super::{until, Session};
use crate::error::{Error, Result};

// The core's words for a listing (see `core/session_view.rs`).
pub(crate) use crate::core::session_view::{Children, Listed};

/// A session id and a lock path.
type Key = (i64, String);

/// The listings of a path in flight on a session: the one sent, and the one to send next.
#[derive(Default)]
struct Flight {
    sent: Option<Arc<Listing>>,
    next: Option<Arc<Listing>>,
}

/// The listings in flight, by session and lock path.
static IN_FLIGHT: LazyLock<Mutex<HashMap<Key, Flight>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// One listing, and who waits for it.
struct Listing {
    /// When the listing was sent (after this); `None` while it waits for the one before.
    sent: Mutex<Option<Instant>>,
    /// `Some` once the lister is done.
    outcome: Mutex<Option<Result<Listed>>>,
    /// Notified once the outcome is in.
    done: Event,
}

impl Listing {
    fn new(sent: Option<Instant>) -> Arc<Listing> {
        Arc::new(Listing {
            sent: Mutex::new(sent),
            outcome: Mutex::new(None),
            done: Event::new(),
        })
    }
}

/// What a caller of [`list_shared`] does.
enum Role {
    Join(Arc<Listing>),
    /// Send `listing` now.
    Lead(Arc<Listing>),
    /// Send `listing` once `before` is answered.
    LeadAfter(Arc<Listing>, Arc<Listing>),
}

/// The children of `lock_path` on `session` and its stat, from a listing sent no earlier than
/// `since`: one in flight if there is such, else the next one, which others may join. One
/// round trip (two when it must wait for the one in flight), within `deadline`.
pub(crate) async fn list_shared(
    session: &Session,
    lock_path: &str,
    deadline: Option<Instant>,
    since: Instant,
) -> Result<Listed> {
    let key = (session.id, lock_path.to_owned());
    // (Decided apart from the awaits: the map's lock is never held across one.)
    let role = {
        let mut in_flight = IN_FLIGHT.lock();
        let flight = in_flight.entry(key.clone()).or_default();
        let fresh = |l: &Arc<Listing>| l.sent.lock().is_some_and(|sent| sent >= since);
        match (&flight.sent, &flight.next) {
            (Some(sent), _) if fresh(sent) => Role::Join(sent.clone()),
            // Not sent yet: it will be sent after `since`.
            (Some(_), Some(next)) => Role::Join(next.clone()),
            (Some(sent), None) => {
                let next = Listing::new(None);
                flight.next = Some(next.clone());
                Role::LeadAfter(next, sent.clone())
            }
            (None, _) => {
                let listing = Listing::new(Some(Instant::now()));
                flight.sent = Some(listing.clone());
                Role::Lead(listing)
            }
        }
    };
    let listing = match role {
        Role::Join(listing) => listing,
        Role::Lead(listing) => return lead(session, key, &listing, deadline).await,
        Role::LeadAfter(listing, before) => {
            let publish = Publish {
                key: key.clone(),
                listing: &listing,
            };
            // Whatever its outcome: ours is sent after it.
            let _ = join(&before, deadline).await;
            publish.promote();
            return lead(session, key, &listing, deadline).await;
        }
    };
    match join(&listing, deadline).await {
        Some(listed) => Ok(listed),
        // The lister's own deadline ran out, its request failed, or it was dropped: list on
        // our own terms.
        None => list(session, lock_path, deadline).await,
    }
}

/// One listing of `path` with its stat.
async fn list(session: &Session, path: &str, deadline: Option<Instant>) -> Result<Listed> {
    let (names, stat) = session.list_with_stat_async(path, deadline).await?;
    Ok(Children::new(names, stat))
}

/// Publishes a listing's outcome when dropped (a failure if none was set), also if its lister
/// panics or is dropped, and lets the joiners go.
struct Publish<'a> {
    key: Key,
    listing: &'a Arc<Listing>,
}

impl Publish<'_> {
    /// Makes the listing, waiting as the next one, the one sent (now): no publication then.
    fn promote(self) {
        *self.listing.sent.lock() = Some(Instant::now());
        let mut in_flight = IN_FLIGHT.lock();
        if let Some(flight) = in_flight.get_mut(&self.key) {
            if flight
                .next
                .as_ref()
                .is_some_and(|l| Arc::ptr_eq(l, self.listing))
            {
                flight.next = None;
            }
            flight.sent = Some(self.listing.clone());
        }
        std::mem::forget(self);
    }
}

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        {
            let mut in_flight = IN_FLIGHT.lock();
            if let Some(flight) = in_flight.get_mut(&self.key) {
                let ours = |l: &Option<Arc<Listing>>| {
                    l.as_ref().is_some_and(|l| Arc::ptr_eq(l, self.listing))
                };
                if ours(&flight.sent) {
                    flight.sent = None;
                }
                if ours(&flight.next) {
                    flight.next = None;
                }
                if flight.sent.is_none() && flight.next.is_none() {
                    in_flight.remove(&self.key);
                }
            }
        }
        // Joiners that find a failure list for themselves.
        self.listing
            .outcome
            .lock()
            .get_or_insert(Err(Error::connection_loss()));
        self.listing.done.notify(usize::MAX);
    }
}

/// Lists for everyone who joins, and publishes the outcome.
async fn lead(
    session: &Session,
    key: Key,
    listing: &Arc<Listing>,
    deadline: Option<Instant>,
) -> Result<Listed> {
    let publish = Publish { key, listing };
    let outcome = list(session, &publish.key.1, deadline).await;
    *listing.outcome.lock() = Some(outcome.clone());
    drop(publish);
    outcome
}

/// Waits for `listing`'s outcome: `None` if the listing failed, or if `deadline` passed first
/// (the caller's own request then reports the deadline as it should).
async fn join(listing: &Listing, deadline: Option<Instant>) -> Option<Listed> {
    loop {
        if let Some(outcome) = listing.outcome.lock().as_ref() {
            return outcome.as_ref().ok().cloned();
        }
        let listener = listing.done.listen();
        if let Some(outcome) = listing.outcome.lock().as_ref() {
            return outcome.as_ref().ok().cloned();
        }
        until(listener, deadline).await.ok()?;
    }
}
