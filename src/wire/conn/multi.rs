//! Writes coalesced into one `multi` (see [`coalesce`] for which): what each
//! caller is answered, the writes sent again one by one when a `multi` fails as a whole, and
//! the reads sent behind an unsettled `multi`, sent again should it fail.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::coalesce::{self, Class};
use super::{lose_all, Answer, OnReply, Shared};
use crate::wire::jute::{Reader, Writer};
use crate::wire::proto::{self, op};

/// A `multi` or a `multiRead` on the wire unanswered: no write of a related node goes out
/// meanwhile (a `multiRead`'s reads may have to be sent again, and must not then see a write
/// queued after them).
pub(super) struct Unsettled {
    /// Its place in the order of the requests written.
    pub(super) seq: u64,
    /// The paths it writes (a create's before its sequence number), or reads.
    pub(super) paths: Vec<String>,
    /// A `multi`'s: set when it failed as a whole, before the replies behind it are read: a
    /// read sent behind it that sees one of its paths is then sent again (see
    /// [`redo_if_failed`]). `None` for a `multiRead`.
    pub(super) failed: Option<Arc<AtomicBool>>,
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

impl Shared {
    /// The `multi` `id` failed as a whole: its writes go out again one by one, in their
    /// order, ahead of every write queued after them (none went out meanwhile), so each caller
    /// gets what its own request gives.
    fn fall_back(&self, id: u64, members: Vec<Member>) {
        let mut outbox = self.outbox.lock();
        self.settled(&mut outbox, id);
        let alone = members.into_iter().map(|m| {
            let class = match m.class {
                Class::Delete(p) | Class::Create(p) => Class::Write(p),
                other => other,
            };
            (m.frame, class, m.on_reply)
        });
        self.queue_first(outbox, alone);
    }
}

/// The reply handler of a `multi` of coalesced writes: all done, each caller gets the reply
/// its own request would have had; failed as a whole (or unreadable), each write goes out
/// again alone; lost, each caller gets the loss, as for a request of its own whose reply was
/// lost (the session layer finds a create again by its node's unique prefix, and checks a
/// delete again). Whatever the answer, the `multi` is no longer unsettled: one over the
/// client's limit (`ReplyTooLarge`) was applied all the same, and the writes it held back may
/// go.
pub(super) fn settle_multi(
    shared: Weak<Shared>,
    id: u64,
    failed: Arc<AtomicBool>,
    members: Vec<Member>,
) -> OnReply {
    Box::new(move |answer| match answer {
        Answer::Lost(err) => {
            if let Some(shared) = shared.upgrade() {
                shared.settled(&mut shared.outbox.lock(), id);
            }
            lose_all(members.into_iter().map(|m| m.on_reply), &err);
            Ok(())
        }
        Answer::Reply {
            err,
            zxid,
            mut body,
            shared,
        } => {
            let results = match proto::read_multi(&mut body) {
                Ok(results) if err == 0 && results.len() == members.len() => results,
                _ => {
                    failed.store(true, Ordering::SeqCst);
                    shared.fall_back(id, members);
                    return Ok(());
                }
            };
            if results
                .iter()
                .any(|r| matches!(r, proto::MultiResult::Error(_)))
            {
                failed.store(true, Ordering::SeqCst);
                shared.fall_back(id, members);
                return Ok(());
            }
            shared.settled(&mut shared.outbox.lock(), id);
            let mut first_malformed = Ok(());
            for (m, result) in members.into_iter().zip(results) {
                let mut reply = Writer::frame();
                if let proto::MultiResult::Created(path, stat) = result {
                    // Before 3.9 a create in a `multi` is answered with its path alone. All
                    // of a `multi` is one transaction: the reply's zxid is the create's.
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
    })
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

/// The reply handler of a request about to be written: a read that sees what unsettled
/// `multi`s write is sent again should one of them fail (see [`redo_if_failed`]).
pub(super) fn read_reply(
    unsettled: &[Unsettled],
    class: &Class,
    frame: &[u8],
    on_reply: OnReply,
) -> OnReply {
    let Class::Read(path) = class else {
        return on_reply;
    };
    let failed: Vec<Arc<AtomicBool>> = unsettled
        .iter()
        .filter(|u| u.paths.iter().any(|w| coalesce::sees(path, w)))
        .filter_map(|u| u.failed.clone())
        .collect();
    if failed.is_empty() {
        on_reply
    } else {
        redo_if_failed(failed, frame.to_vec(), on_reply)
    }
}

/// The reply handler of a read sent behind unsettled `multi`s that write what it reads: if
/// one of them failed as a whole, its writes are sent again and the read, answered before
/// them, is sent again behind them; its caller gets that answer.
fn redo_if_failed(failed: Vec<Arc<AtomicBool>>, frame: Vec<u8>, on_reply: OnReply) -> OnReply {
    Box::new(move |answer| match answer {
        Answer::Reply { shared, .. } if failed.iter().any(|f| f.load(Ordering::SeqCst)) => {
            shared.read_again(frame, on_reply);
            Ok(())
        }
        answer => on_reply(answer),
    })
}
