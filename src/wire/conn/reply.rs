//! What a request's caller is given: the answer to its request, or why none will come.

use std::sync::atomic::AtomicBool;

use super::known_parents::KnownParents;
use crate::wire::error::Error;
use crate::wire::jute::{Malformed, Reader};

/// Decodes a reply for its request and fills the caller's completion. `Err` if the reply does
/// not decode: the connection is then reset.
pub(crate) type OnReply = Box<dyn FnOnce(Answer<'_>) -> Result<(), Malformed> + Send>;

/// Tells each of `replies` that its answer is lost with `err` (the members of a lost
/// `multi` or `multiRead`, each as a request of its own would have been).
pub(super) fn lose_all(replies: impl IntoIterator<Item = OnReply>, err: &Error) {
    for on_reply in replies {
        let _ = on_reply(Answer::Lost(err.clone()));
    }
}

/// What a pending request gets.
pub(crate) enum Answer<'a> {
    Reply {
        err: i32,
        /// The reply header's zxid: for a write, its transaction's.
        zxid: i64,
        body: Reader<'a>,
        learned: &'a Learned,
    },
    /// No reply will come (the connection or the session ended first), or none can be read
    /// (one over the client's limit, skipped: [`Error::ReplyTooLarge`]).
    Lost(Error),
}

/// What the session learns from replies, recorded by the handlers of the replies that tell
/// it: each [`Answer::Reply`] lends it, and nothing else of the session, which a handler has
/// no business with.
pub(crate) struct Learned {
    /// Which lock paths a create may go out in a `multi` under.
    pub(crate) known_parents: KnownParents,
    /// The server answered our CloseSession: the session and its ephemeral nodes are gone.
    pub(super) close_confirmed: AtomicBool,
    /// The server answered our CloseSession (whatever it said).
    pub(super) close_answered: AtomicBool,
}

impl Learned {
    /// Nothing learned yet: a new session's.
    pub(super) fn new() -> Learned {
        Learned {
            known_parents: KnownParents::new(),
            close_confirmed: AtomicBool::new(false),
            close_answered: AtomicBool::new(false),
        }
    }
}
