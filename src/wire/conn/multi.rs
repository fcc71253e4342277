//! Writes coalesced into one `multi` (see [`coalesce`](super::coalesce) for which): what each
//! caller is answered. What goes out again when a `multi` fails as a whole is the outbox's
//! decision (see [`Outbox::multi_failed`](super::outbox::Outbox::multi_failed)).

use std::sync::Arc;

use super::coalesce::Class;
use super::reply::{lose_all, Answer, OnReply};
use super::Shared;
use crate::wire::error::Error;
use crate::wire::jute::{Malformed, Reader, Writer};
use crate::wire::proto::{self, op};

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

/// Settles the `multi` `seq` of coalesced writes `members` with its `answer`: all done, each
/// caller gets the reply its own request would have had; failed as a whole (or unreadable),
/// the outbox sends each write again alone; lost, each caller gets the loss, as for a request
/// of its own whose reply was lost (the session layer finds a create again by its node's
/// unique prefix, and checks a delete again). Whatever the answer, the `multi` is no longer
/// unsettled: one over the client's limit (`ReplyTooLarge`) was applied all the same, and the
/// writes it held back may go. Runs no caller's code under the outbox's lock.
pub(super) fn settle(
    shared: &Arc<Shared>,
    seq: u64,
    members: Vec<Member>,
    answer: Answer<'_>,
) -> Result<(), Malformed> {
    let (zxid, mut body) = match answer {
        Answer::Lost(err) => {
            shared.outbox.lock().settled(seq);
            lose_all(members.into_iter().map(|m| m.on_reply), &err);
            return Ok(());
        }
        Answer::Reply {
            err: 0, zxid, body, ..
        } => (zxid, body),
        Answer::Reply { .. } => return fall_back(shared, seq, members),
    };
    let results = match proto::read_multi(&mut body) {
        Ok(results) if results.len() == members.len() => results,
        _ => return fall_back(shared, seq, members),
    };
    if results
        .iter()
        .any(|r| matches!(r, proto::MultiResult::Error(_)))
    {
        return fall_back(shared, seq, members);
    }
    shared.outbox.lock().settled(seq);
    let mut first_malformed = Ok(());
    for (m, result) in members.into_iter().zip(results) {
        let mut reply = Writer::frame();
        if let proto::MultiResult::Created(path, stat) = result {
            // Before 3.9 a create in a `multi` is answered with its path alone. All of a
            // `multi` is one transaction: the reply's zxid is the create's.
            let stat = stat.unwrap_or_else(|| created_stat(&m.frame, zxid, shared));
            reply.string(&path);
            reply.record(&stat);
        }
        let reply = reply.finish();
        let answered = (m.on_reply)(Answer::Reply {
            err: 0,
            zxid,
            body: Reader::new(&reply[4..]),
            shared,
        });
        if first_malformed.is_ok() {
            first_malformed = answered;
        }
    }
    first_malformed
}

/// The `multi` `seq` failed as a whole: the outbox sends its writes again alone.
fn fall_back(shared: &Shared, seq: u64, members: Vec<Member>) -> Result<(), Malformed> {
    let refused = shared.outbox.lock().multi_failed(seq, members);
    lose_all(refused, &Error::ConnectionLoss);
    Ok(())
}

/// The stat of a node created by the create request `frame` (its body: path, data, ACL,
/// flags) in the transaction `zxid` of session `shared`: what ZooKeeper before 3.9 leaves out
/// of its answer. The times are not known (0); nothing reads them of our own nodes.
fn created_stat(frame: &[u8], zxid: i64, shared: &Shared) -> proto::Stat {
    let mut body = Reader::new(frame.get(12..).unwrap_or_default());
    let data_length = body
        .string()
        .and_then(|_| body.buffer())
        .map_or(0, |data| data.len() as i32);
    proto::Stat {
        czxid: zxid,
        mzxid: zxid,
        pzxid: zxid,
        ephemeral_owner: shared.session_id,
        data_length,
        ..proto::Stat::default()
    }
}
