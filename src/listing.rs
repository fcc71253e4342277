//! Listings of a lock path shared by the waiters of one session.
//!
//! After a reconnect every waiter on the session wakes and looks at the queue again. Were each
//! to list the lock path itself, N waiters would fetch N listings of an N-node queue: O(N²)
//! bytes from the server in one burst. Instead the first one lists, and the others that woke
//! for the same reason join its listing while it is in flight.
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

use crate::error::{Error, Result};
use crate::session::{until, Session};

/// A session id and a lock path.
type Key = (i64, String);

/// The listings in flight, by session and lock path.
static IN_FLIGHT: LazyLock<Mutex<HashMap<Key, Arc<Listing>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// One listing in flight, and who waits for it.
struct Listing {
    /// When the listing was asked for (its request is sent after this).
    started: Instant,
    /// `Some` once the lister is done.
    outcome: Mutex<Option<Result<Arc<Vec<String>>>>>,
    /// Notified once the outcome is in.
    done: Event,
}

/// The children of `lock_path` on `session`, from a listing asked for no earlier than
/// `since`: one in flight if there is such, else a new one that others may join. One round
/// trip, as [`Session::list_async`], within `deadline`.
pub(crate) async fn list_shared(
    session: &Session,
    lock_path: &str,
    deadline: Option<Instant>,
    since: Instant,
) -> Result<Arc<Vec<String>>> {
    let key = (session.id, lock_path.to_owned());
    // (Decided apart from the awaits: the map's lock is never held across one.)
    let (listing, leading) = {
        let mut in_flight = IN_FLIGHT.lock();
        match in_flight.get(&key) {
            Some(listing) if listing.started >= since => (listing.clone(), false),
            _ => {
                let listing = Arc::new(Listing {
                    started: Instant::now(),
                    outcome: Mutex::new(None),
                    done: Event::new(),
                });
                in_flight.insert(key.clone(), listing.clone());
                (listing, true)
            }
        }
    };
    if leading {
        return lead(session, key, &listing, deadline).await;
    }
    match join(&listing, deadline).await {
        Some(listed) => Ok(listed),
        // The lister's own deadline ran out, its request failed, or it was dropped: list on
        // our own terms.
        None => session.list_async(lock_path, deadline).await.map(Arc::new),
    }
}

/// Lists for everyone who joins, and publishes the outcome, also if listing panics or the
/// lister's future is dropped.
async fn lead(
    session: &Session,
    key: Key,
    listing: &Arc<Listing>,
    deadline: Option<Instant>,
) -> Result<Arc<Vec<String>>> {
    /// Publishes the outcome (a failure if none was set) and lets the joiners go.
    struct Publish<'a> {
        key: Key,
        listing: &'a Arc<Listing>,
    }
    impl Drop for Publish<'_> {
        fn drop(&mut self) {
            {
                let mut in_flight = IN_FLIGHT.lock();
                if in_flight
                    .get(&self.key)
                    .is_some_and(|l| Arc::ptr_eq(l, self.listing))
                {
                    in_flight.remove(&self.key);
                }
            }
            // Joiners that find a failure list for themselves.
            self.listing
                .outcome
                .lock()
                .get_or_insert(Err(Error::ConnectionLoss));
            self.listing.done.notify(usize::MAX);
        }
    }
    let publish = Publish { key, listing };
    let outcome = session
        .list_async(&publish.key.1, deadline)
        .await
        .map(Arc::new);
    *listing.outcome.lock() = Some(outcome.clone());
    drop(publish);
    outcome
}

/// Waits for `listing`'s outcome: `None` if the listing failed, or if `deadline` passed first
/// (the caller's own request then reports the deadline as it should).
async fn join(listing: &Listing, deadline: Option<Instant>) -> Option<Arc<Vec<String>>> {
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
