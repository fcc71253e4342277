//! Writes coalesced into one `multi` (see [`coalesce`](super::coalesce) for which): what each
//! carries, and what the reads written behind one wait on. What each caller is answered is
//! [`settle::multi`](super::settle::multi)'s; what goes out again when a `multi` fails as a
//! whole is the outbox's decision (see
//! [`Outbox::multi_failed`](super::outbox::Outbox::multi_failed)).

use super::coalesce::Class;
use super::reply::OnReply;
use crate::wire::proto::op;

/// The `multi`s a read was written behind that write what it sees (their sequence numbers),
/// and whether one of them failed as a whole: its answer is then put aside, and the read sent
/// again behind the writes sent again.
#[derive(Default)]
pub(super) struct Behind {
    multis: Vec<u64>,
    pub(super) failed: bool,
}

impl Behind {
    /// Whether it waits on no `multi` at all.
    pub(super) fn is_empty(&self) -> bool {
        self.multis.is_empty()
    }

    /// The `multi`s of `seqs` are among them.
    pub(super) fn extend(&mut self, seqs: impl Iterator<Item = u64>) {
        self.multis.extend(seqs);
    }

    /// The `multi` `seq` failed as a whole.
    pub(super) fn fail(&mut self, seq: u64) {
        if self.multis.contains(&seq) {
            self.failed = true;
        }
    }
}

/// A write sent in a `multi`: what it needs to be sent again alone, and its caller's reply.
pub(super) struct Member {
    pub(super) frame: Vec<u8>,
    pub(super) class: Class,
    pub(super) on_reply: OnReply,
}

impl Member {
    /// Its operation in the `multi`: a lock-node create is a create2 (answered with its stat
    /// from ZooKeeper 3.9), as it is alone.
    pub(super) fn opcode(&self) -> i32 {
        match self.class {
            Class::Delete(_) => op::DELETE,
            _ => op::CREATE2,
        }
    }
}
