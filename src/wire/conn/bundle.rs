//! Reads that go out together as one `multiRead` (ZooKeeper 3.6 and later).
//!
//! With many locks on one session, every lock cycle lists its lock path right behind its
//! create, and the server pays a request's costs (decoding, its queues, the answer's write)
//! per listing. Reads the planner sends back to back cost the same as one `multiRead` of them:
//! the server answers its reads one after another in one pass, each with the outcome it
//! would have had alone (an error in one fails that one only), and no other request of the
//! session runs between them. So consecutive reads that set no watch go out as one: a
//! getData as itself, a getChildren2 as a getChildren followed by a getData of the same node
//! (a `multiRead` takes no getChildren2; the getData brings the stat it answers with). Each
//! caller then reads the answer its own request would have had.
//!
//! A `multiRead` fails as a whole only when its answer is lost, over the client's reply limit,
//! or refused by a server that does not know the request: its reads then go out again one by
//! one (a lost answer is a loss for each, as it would have been alone), and a server that
//! refused it gets no other on this session (see
//! [`settle::multi_read`](super::settle::multi_read)).

use super::multi::Behind;
use super::reply::OnReply;
use crate::wire::jute::Writer;
use crate::wire::proto::{op, RawRead};

/// How many reads one `multiRead` takes at most: their answers share one reply, which the
/// server builds whole and which must stay under the client's limit (a larger one is sent
/// again read by read).
pub(super) const MAX_READS: usize = 32;

/// A read that may go out in a `multiRead`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadKind {
    /// A getChildren2 that sets no watch.
    Children,
    /// A getData that sets no watch.
    Data,
}

impl ReadKind {
    /// The kind of the request `frame` (length prefix, xid, opcode, body), if it may go out in
    /// a `multiRead`.
    pub(super) fn of(frame: &[u8]) -> Option<ReadKind> {
        let opcode = i32::from_be_bytes(frame.get(8..12)?.try_into().ok()?);
        let kind = match opcode {
            op::GET_CHILDREN2 => ReadKind::Children,
            op::GET_DATA => ReadKind::Data,
            _ => return None,
        };
        // Body: the path (an int length and its bytes), then the watch flag.
        let len = i32::from_be_bytes(frame.get(12..16)?.try_into().ok()?);
        let watch = *frame.get(16 + usize::try_from(len).ok()?)?;
        (watch == 0 && frame.len() == 17 + len as usize).then_some(kind)
    }
}

/// A read sent in a `multiRead`: what it needs to be sent again alone, and its caller's reply.
pub(super) struct Member {
    pub(super) frame: Vec<u8>,
    pub(super) kind: ReadKind,
    pub(super) on_reply: OnReply,
    /// The `multi`s it was written behind that write what it reads.
    pub(super) behind: Behind,
}

impl Member {
    /// The bytes its operations add to the `multiRead` (headers included).
    pub(super) fn len(frame: &[u8], kind: ReadKind) -> usize {
        let body = frame.len().saturating_sub(12);
        match kind {
            ReadKind::Children => 2 * (9 + body),
            ReadKind::Data => 9 + body,
        }
    }
}

/// The frame of a `multiRead` of `members` with `xid`.
pub(super) fn encode(xid: i32, members: &[Member]) -> Vec<u8> {
    let mut w = Writer::frame();
    w.int(xid).int(op::MULTI_READ);
    for m in members {
        // The body of a getChildren2 or getData request (path, watch) is that of a
        // getChildren or getData operation.
        let body = &m.frame[12..];
        if m.kind == ReadKind::Children {
            w.int(op::GET_CHILDREN).boolean(false).int(-1).raw(body);
        }
        w.int(op::GET_DATA).boolean(false).int(-1).raw(body);
    }
    w.int(-1).boolean(true).int(-1);
    w.finish()
}

/// What each member's own request would have been answered, from the results of the
/// `multiRead` (in the order of `encode`): `None` if they do not fit the members.
pub(super) fn answers<'a>(
    members: &[Member],
    results: &[RawRead<'a>],
) -> Option<Vec<(i32, Vec<u8>)>> {
    let mut results = results.iter();
    let mut answers = Vec::with_capacity(members.len());
    for m in members {
        let answer = match (m.kind, results.next()?) {
            (ReadKind::Data, RawRead::Data { body, .. }) => (0, body.to_vec()),
            (ReadKind::Data, RawRead::Error(code)) => (*code, Vec::new()),
            (ReadKind::Children, listed) => match (listed, results.next()?) {
                (RawRead::Children(children), RawRead::Data { stat, .. }) => {
                    let mut body = Vec::with_capacity(children.len() + stat.len());
                    body.extend_from_slice(children);
                    body.extend_from_slice(stat);
                    (0, body)
                }
                // The node went (or came) between the two reads: as if listed after, or
                // before, the change.
                (RawRead::Error(code), _) | (_, RawRead::Error(code)) => (*code, Vec::new()),
                _ => return None,
            },
            _ => return None,
        };
        answers.push(answer);
    }
    results.next().is_none().then_some(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::jute::Reader;
    use crate::wire::proto::{self, Stat};

    /// A request frame (xid 0) of `opcode` on `path` with the watch flag `watch`.
    fn read_frame(opcode: i32, path: &str, watch: bool) -> Vec<u8> {
        let mut w = Writer::frame();
        w.int(0).int(opcode).string(path).boolean(watch);
        w.finish()
    }

    fn member(opcode: i32, path: &str) -> Member {
        let frame = read_frame(opcode, path, false);
        Member {
            kind: ReadKind::of(&frame).expect("bundled"),
            frame,
            on_reply: Box::new(|_| Ok(())),
            behind: Behind::default(),
        }
    }

    fn stat(czxid: i64) -> Stat {
        Stat {
            czxid,
            ..Stat::default()
        }
    }

    #[test]
    fn only_reads_that_set_no_watch_are_bundled() {
        use crate::wire::proto::op;
        let kind = |opcode, watch| ReadKind::of(&read_frame(opcode, "/a/b", watch));
        assert_eq!(kind(op::GET_CHILDREN2, false), Some(ReadKind::Children));
        assert_eq!(kind(op::GET_DATA, false), Some(ReadKind::Data));
        assert_eq!(kind(op::GET_CHILDREN2, true), None);
        assert_eq!(kind(op::GET_DATA, true), None);
        assert_eq!(kind(op::EXISTS, false), None);
        // A body that is not {path, watch} exactly is not taken apart.
        let mut longer = read_frame(op::GET_DATA, "/a", false);
        longer.push(0);
        assert_eq!(ReadKind::of(&longer), None);
        assert_eq!(ReadKind::of(&longer[..10]), None);
    }

    #[test]
    fn a_listing_goes_as_children_then_data_of_its_node() {
        let members = [
            member(op::GET_CHILDREN2, "/l/a"),
            member(op::GET_DATA, "/l/b"),
        ];
        let frame = encode(7, &members);
        let mut r = Reader::new(&frame[4..]);
        assert_eq!((r.int().unwrap(), r.int().unwrap()), (7, op::MULTI_READ));
        let mut ops = Vec::new();
        loop {
            let (kind, done, _) = (r.int().unwrap(), r.boolean().unwrap(), r.int().unwrap());
            if done {
                break;
            }
            ops.push((kind, r.string().unwrap(), r.boolean().unwrap()));
        }
        assert_eq!(
            ops,
            [
                (op::GET_CHILDREN, "/l/a".to_owned(), false),
                (op::GET_DATA, "/l/a".to_owned(), false),
                (op::GET_DATA, "/l/b".to_owned(), false),
            ]
        );
        assert_eq!(r.remaining(), 0);
        assert_eq!(
            frame.len() - 12,
            members
                .iter()
                .map(|m| Member::len(&m.frame, m.kind))
                .sum::<usize>()
                + 9,
            "Member::len counts what encode writes"
        );
    }

    /// Each member reads the answer its own request would have had: a getChildren2 reply
    /// (children, then the node's stat) from its two results, a getData reply as it is, an
    /// error alone.
    #[test]
    fn each_read_gets_its_own_answer() {
        let members = [
            member(op::GET_CHILDREN2, "/l/a"),
            member(op::GET_DATA, "/l/b"),
            member(op::GET_CHILDREN2, "/l/c"),
        ];
        let mut w = Writer::frame();
        w.int(op::GET_CHILDREN).boolean(false).int(0);
        w.strings(&["lock-0000000003"]);
        w.int(op::GET_DATA).boolean(false).int(0).buffer(b"");
        w.record(&stat(11));
        w.int(op::GET_DATA).boolean(false).int(0).buffer(b"owner");
        w.record(&stat(12));
        w.int(op::ERROR).boolean(false).int(-101).int(-101);
        w.int(op::ERROR).boolean(false).int(-101).int(-101);
        w.int(-1).boolean(true).int(-1);
        let reply = w.finish();
        let results = proto::read_multi_read_raw(&mut Reader::new(&reply[4..])).unwrap();
        let answers = answers(&members, &results).expect("they fit");
        let mut r = Reader::new(&answers[0].1);
        assert_eq!(answers[0].0, 0);
        assert_eq!(r.strings().unwrap(), ["lock-0000000003"]);
        assert_eq!(proto::read_stat(&mut r).unwrap().czxid, 11);
        assert_eq!(r.remaining(), 0);
        let mut r = Reader::new(&answers[1].1);
        assert_eq!(r.buffer().unwrap(), b"owner");
        assert_eq!(proto::read_stat(&mut r).unwrap().czxid, 12);
        assert_eq!(answers[2], (-101, Vec::new()));
    }

    #[test]
    fn results_that_do_not_fit_the_reads_are_no_answer() {
        let members = [member(op::GET_CHILDREN2, "/l/a")];
        let children = RawRead::Children(&[0, 0, 0, 0]);
        let data = RawRead::Data {
            body: &[],
            stat: &[],
        };
        // One result short, one too many, a getData where the children should be.
        assert!(answers(&members, &[children]).is_none());
        assert!(answers(&members, &[children, data, data]).is_none());
        assert!(answers(&members, &[data, data]).is_none());
        assert!(answers(&members, &[children, data]).is_some());
    }
}
