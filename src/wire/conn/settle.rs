//! Settling a batch with its answer: a `multi` of coalesced writes (see [`mod@multi`]) or a
//! `multiRead` of reads (see [`bundle`]). Each caller gets the answer its own request would
//! have had, or the outbox sends the batch's requests again alone (see
//! [`Outbox::multi_failed`](super::outbox::Outbox::multi_failed)). Runs no caller's code
//! under the outbox's lock.

use std::sync::atomic::Ordering;

use super::reply::{lose_all, Answer};
use super::{bundle, multi, Shared};
use crate::wire::error::Error;
use crate::wire::jute::{Malformed, Reader, Writer};
use crate::wire::proto;

/// Settles the `multi` `seq` of coalesced writes `members` with its `answer`: all done, each
/// caller gets the reply its own request would have had; failed as a whole (or unreadable),
/// the outbox sends each write again alone; lost, each caller gets the loss, as for a request
/// of its own whose reply was lost (the session layer finds a create again by its node's
/// unique prefix, and checks a delete again). Whatever the answer, the `multi` is no longer
/// unsettled: one over the client's limit (`ReplyTooLarge`) was applied all the same, and the
/// writes it held back may go.
pub(super) fn multi(
    shared: &Shared,
    seq: u64,
    members: Vec<multi::Member>,
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
            learned: &shared.learned,
        });
        if first_malformed.is_ok() {
            first_malformed = answered;
        }
    }
    first_malformed
}

/// The `multi` `seq` failed as a whole: the outbox sends its writes again alone.
fn fall_back(shared: &Shared, seq: u64, members: Vec<multi::Member>) -> Result<(), Malformed> {
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

impl Shared {
    /// The server does not take `multiRead`s (it answered one with `err`): reads go out one
    /// by one on this session from now on.
    pub(super) fn refuse_multi_read(&self, err: i32) {
        if self.multi_read.swap(false, Ordering::SeqCst) {
            log::warn!(
                "session {:#x}: the server answered a multiRead with error {err} or an answer \
                 that does not fit it; reads go out one by one from now on",
                self.session_id
            );
        }
    }
}

/// Settles the `multiRead` `seq` of `members` with its `answer`: each read gets the answer its
/// own request would have had (but one behind a `multi` that failed, which the outbox reads
/// again); failed as a whole, the outbox sends each read again alone.
pub(super) fn multi_read(
    shared: &Shared,
    seq: u64,
    members: Vec<bundle::Member>,
    answer: Answer<'_>,
) -> Result<(), Malformed> {
    let (err, zxid, mut body) = match answer {
        Answer::Lost(Error::ReplyTooLarge { size, limit }) => {
            log::debug!(
                "session {:#x}: a multiRead of {} reads was answered with {size} bytes \
                 (limit {limit}); sending them one by one",
                shared.session_id,
                members.len()
            );
            let refused = shared.outbox.lock().multi_read_failed(seq, members);
            lose_all(refused, &Error::ConnectionLoss);
            return Ok(());
        }
        Answer::Lost(err) => {
            shared.outbox.lock().settled(seq);
            lose_all(members.into_iter().map(|m| m.on_reply), &err);
            return Ok(());
        }
        Answer::Reply {
            err, zxid, body, ..
        } => (err, zxid, body),
    };
    let results = (err == 0)
        .then(|| proto::read_multi_read_raw(&mut body).ok())
        .flatten();
    let Some(answers) = results.and_then(|r| bundle::answers(&members, &r)) else {
        // Not a server's answer to a `multiRead`: one that does not know the request (before
        // 3.6) answers Unimplemented, and closes the connection. None again on this session;
        // the reads go out alone (on the next connection, if so). An answer that does not
        // parse, Unimplemented, Marshalling: not understood.
        let unknown = matches!(err, 0 | -5 | -6);
        if unknown {
            shared.refuse_multi_read(err);
        }
        let refused = shared.outbox.lock().multi_read_failed(seq, members);
        lose_all(refused, &Error::ConnectionLoss);
        return Ok(());
    };
    let answered = members.into_iter().zip(answers).collect();
    let (answered, refused) = shared.outbox.lock().reads_answered(seq, answered);
    lose_all(refused, &Error::ConnectionLoss);
    let mut first_malformed = Ok(());
    for (m, (err, reply)) in answered {
        let answered = (m.on_reply)(Answer::Reply {
            err,
            zxid,
            body: Reader::new(&reply),
            learned: &shared.learned,
        });
        if first_malformed.is_ok() {
            first_malformed = answered;
        }
    }
    first_malformed
}
