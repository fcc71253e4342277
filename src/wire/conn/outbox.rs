//! The outbox: the one owner of the transport's order. It holds the requests queued and not
//! yet written, those written and not yet answered, the `multi`s and `multiRead`s on the wire
//! unsettled, and the reads to do again; one lock guards it all, so each of its decisions sees
//! the whole. It does no I/O and runs no caller's code: the caller writes what it takes, the
//! I/O thread completes what an answer gives, both after letting go of the lock.
//!
//! Its order (see [`coalesce`] for the planner's rules): no write of a related node goes out
//! while a `multi` or `multiRead` is unsettled; a `multi` or `multiRead` that fails as a whole
//! is sent again member by member ahead of what was queued after it; a read answered behind a
//! `multi` that failed and wrote what it sees is read again behind the writes sent again.
//!
//! Liveness traffic never waits behind bulk traffic: at most [`MAX_IN_FLIGHT`] requests are on
//! the wire unanswered, the rest wait in the queue, and a ping or a keepalive sync goes out
//! ahead of them, so its answer waits for no more than that many others.

use std::collections::VecDeque;

use super::bundle::{self, ReadKind};
use super::coalesce::{self, Class, Queued, Take};
use super::multi::{self, Behind};
use super::reply::OnReply;
use crate::wire::jute::{Malformed, Writer};
use crate::wire::proto::op;

/// How many requests may be on the wire unanswered. The server answers one session's requests
/// one after another, so a request written behind N others waits for all of them: 2,000
/// waiters re-listing after a reconnect once kept a keepalive sync waiting for two seconds,
/// and their holder read `Suspended` on a healthy session. A few hundred keep the server
/// busy all the same.
pub(super) const MAX_IN_FLIGHT: usize = 256;

/// How many bytes one write takes from the outbox at most.
const MAX_BATCH: usize = 256 * 1024;

/// How many queued requests a plan looks at beyond those it takes (see [`coalesce::Wire`]).
const MAX_SCAN: usize = 256;

/// How many writes one `multi` takes at most (also bounded by the client's largest reply).
const MAX_MULTI_OPS: usize = 512;

/// How many bytes of writes one `multi` carries at most: far under the server's
/// `jute.maxbuffer` (1 MiB), which refuses the whole request above it.
const MAX_MULTI_BYTES: usize = 128 * 1024;

/// The requests of a session, from their call to their answer.
pub(super) struct Outbox {
    /// Requests are accepted: a connection is installed and its watches are set again.
    open: bool,
    next_xid: i32,
    /// Not yet written, in the order they go out: urgent ones at the front, the others in
    /// the order of the calls.
    queue: VecDeque<Outgoing>,
    /// Written and not yet answered, in the order of the wire (the server answers in it).
    pending: VecDeque<Pending>,
    /// The sequence number of the next request written (see [`Pending::seq`]).
    written: u64,
    /// The `multi`s and `multiRead`s on the wire unanswered. No write of a related node goes
    /// out while there is one (see [`coalesce`]).
    unsettled: Vec<Unsettled>,
    /// The client's largest reply: a `multi`'s answer must fit it.
    max_reply: usize,
}

/// A request queued and not yet written.
pub(super) struct Outgoing {
    frame: Vec<u8>,
    on_reply: OnReply,
    /// Goes out ahead of the others, and even with [`MAX_IN_FLIGHT`] unanswered.
    urgent: bool,
    class: Class,
    /// [`Outbox::written`] when it was queued.
    after: u64,
    /// It may go out in a `multiRead` with the reads written right after it (see [`bundle`]).
    bundle: Option<ReadKind>,
    /// A read sent before, behind `multi`s that write what it sees.
    behind: Behind,
}

impl Queued for Outgoing {
    fn urgent(&self) -> bool {
        self.urgent
    }
    fn class(&self) -> &Class {
        &self.class
    }
    fn after(&self) -> u64 {
        self.after
    }
    fn bundles(&self) -> bool {
        self.bundle.is_some()
    }
    fn len(&self) -> usize {
        self.frame.len()
    }
}

/// A request written and not yet answered.
struct Pending {
    xid: i32,
    /// Its place in the order of the requests written on this session (0 for one written
    /// before any other on its connection, a SetWatches): a coalesced delete waits for the
    /// replies to those written before it was queued.
    seq: u64,
    reply: Reply,
}

/// Who reads a pending request's answer.
enum Reply {
    /// One caller's request (a read written behind `multi`s that write what it sees carries
    /// them in `behind`, and its `frame` to read again).
    One {
        on_reply: OnReply,
        behind: Behind,
        frame: Vec<u8>,
    },
    /// A `multi` of coalesced writes.
    Multi(Vec<multi::Member>),
    /// A `multiRead` of reads.
    MultiRead(Vec<bundle::Member>),
}

/// A `multi` or a `multiRead` on the wire unanswered: no write of a related node goes out
/// meanwhile (a `multiRead`'s reads may have to be sent again, and must not then see a write
/// queued after them).
struct Unsettled {
    /// Its place in the order of the requests written.
    seq: u64,
    /// The paths it writes (a create's before its sequence number), or reads.
    paths: Vec<String>,
    /// A `multi` (whose failure sends the reads behind it again), not a `multiRead`.
    multi: bool,
}

/// What an answer asks of the I/O thread, once it has let go of the outbox's lock.
pub(super) enum Due {
    /// Give the answer to this caller.
    One(OnReply),
    /// Settle the `multi` `seq` of these writes with the answer (see
    /// [`settle::multi`](super::settle::multi)).
    Multi {
        seq: u64,
        members: Vec<multi::Member>,
    },
    /// Settle the `multiRead` `seq` of these reads with the answer (see
    /// [`settle::multi_read`](super::settle::multi_read)).
    MultiRead {
        seq: u64,
        members: Vec<bundle::Member>,
    },
    /// Nothing: the read answered is queued again (a `multi` it saw failed), or, the outbox
    /// closed, this caller gets ConnectionLoss instead.
    Again(Option<OnReply>),
}

impl Outbox {
    /// A closed outbox (no connection yet), whose `multi`s' answers must fit `max_reply`.
    pub(super) fn new(max_reply: usize) -> Outbox {
        Outbox {
            open: false,
            next_xid: 1,
            queue: VecDeque::new(),
            pending: VecDeque::new(),
            written: 1,
            unsettled: Vec::new(),
            max_reply,
        }
    }

    /// A connection is installed and its watches are set again: requests are accepted.
    pub(super) fn open(&mut self) {
        self.open = true;
    }

    /// Numbers `frame` (a request with its xid still 0) and queues it, ahead of the others if
    /// `urgent`; gives `on_reply` back while closed.
    pub(super) fn push(
        &mut self,
        mut frame: Vec<u8>,
        on_reply: OnReply,
        urgent: bool,
        class: Class,
        bundle: Option<ReadKind>,
    ) -> Result<(), OnReply> {
        if !self.open {
            return Err(on_reply);
        }
        let xid = next_xid(&mut self.next_xid);
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
        let outgoing = Outgoing {
            frame,
            on_reply,
            urgent,
            class,
            after: self.written,
            bundle,
            behind: Behind::default(),
        };
        if urgent {
            self.queue.push_front(outgoing);
        } else {
            self.queue.push_back(outgoing);
        }
        Ok(())
    }

    /// A request of `xid` written ahead of the queue, before the outbox opens (a SetWatches):
    /// its answer goes to `on_reply`.
    pub(super) fn written_aside(&mut self, xid: i32, on_reply: OnReply) {
        self.pending.push_back(Pending {
            xid,
            seq: 0,
            reply: Reply::One {
                on_reply,
                behind: Behind::default(),
                frame: Vec::new(),
            },
        });
    }

    /// Whether the queue holds a request that may go out now.
    pub(super) fn ready(&self) -> bool {
        !self.queue.is_empty() && !self.plan(1).is_empty()
    }

    /// What may go out now (at most `limit` takes).
    fn plan(&self, limit: usize) -> Vec<Take> {
        let unsettled: Vec<&str> = self
            .unsettled
            .iter()
            .flat_map(|u| u.paths.iter().map(String::as_str))
            .collect();
        let wire = coalesce::Wire {
            room: MAX_IN_FLIGHT.saturating_sub(self.pending.len()),
            oldest_unanswered: self.pending.front().map(|p| p.seq),
            unsettled: &unsettled,
            max_bytes: MAX_BATCH,
            max_ops: MAX_MULTI_OPS,
            max_multi_bytes: MAX_MULTI_BYTES,
            max_multi_reply: self.max_reply,
            max_scan: MAX_SCAN,
        };
        coalesce::plan(&self.queue, &wire, limit)
    }

    /// Takes the next requests to write, as pending, and returns their frames; `None` if none
    /// may go now (see [`coalesce`] for what goes now and what goes together). Reads written
    /// back to back go out as one `multiRead` if `multi_read`. The caller writes the bytes
    /// before it lets another take (the wire's order is the order of the takes).
    pub(super) fn take(&mut self, multi_read: bool) -> Option<Vec<u8>> {
        let takes = self.plan(usize::MAX);
        if takes.is_empty() {
            return None;
        }
        // Only the part of the queue the plan looked at is taken apart: it may be long.
        let end = 1 + takes
            .iter()
            .flat_map(|take| match take {
                Take::One(i) => std::slice::from_ref(i),
                Take::Multi(run) => run.as_slice(),
            })
            .max()
            .expect("a take has an index");
        let mut wanted = vec![false; end];
        for take in &takes {
            match take {
                Take::One(i) => wanted[*i] = true,
                Take::Multi(run) => run.iter().for_each(|i| wanted[*i] = true),
            }
        }
        let mut taken: Vec<Option<Outgoing>> = Vec::with_capacity(end);
        let mut left = VecDeque::new();
        for (i, outgoing) in self.queue.drain(..end).enumerate() {
            if wanted[i] {
                taken.push(Some(outgoing));
            } else {
                taken.push(None);
                left.push_back(outgoing);
            }
        }
        while let Some(outgoing) = left.pop_back() {
            self.queue.push_front(outgoing);
        }
        let mut batch = Vec::new();
        let mut takes = takes.into_iter().peekable();
        while let Some(take) = takes.next() {
            let seq = self.written;
            self.written += 1;
            match take {
                Take::One(i) => {
                    let outgoing = taken[i].take().expect("taken once");
                    // Reads written back to back go out as one `multiRead`.
                    let mut reads = Vec::new();
                    if let Some(kind) = outgoing.bundle.filter(|_| multi_read) {
                        let mut bytes = bundle::Member::len(&outgoing.frame, kind);
                        while let Some(Take::One(j)) = takes.peek() {
                            let Some(next) = taken[*j].as_ref() else {
                                break;
                            };
                            let Some(kind) = next.bundle else { break };
                            bytes += bundle::Member::len(&next.frame, kind);
                            if reads.len() + 1 >= bundle::MAX_READS || bytes > MAX_MULTI_BYTES {
                                break;
                            }
                            let next = taken[*j].take().expect("taken once");
                            takes.next();
                            reads.push(next);
                        }
                    }
                    if reads.is_empty() {
                        self.write_one(seq, outgoing, &mut batch);
                    } else {
                        reads.insert(0, outgoing);
                        self.write_multi_read(seq, reads, &mut batch);
                    }
                }
                Take::Multi(run) => {
                    let members = run
                        .into_iter()
                        .map(|i| {
                            let outgoing = taken[i].take().expect("taken once");
                            multi::Member {
                                frame: outgoing.frame,
                                class: outgoing.class,
                                on_reply: outgoing.on_reply,
                            }
                        })
                        .collect();
                    self.write_multi(seq, members, &mut batch);
                }
            }
        }
        Some(batch)
    }

    /// The `multi`s unsettled that write what a read of `class` sees, added to `behind`.
    fn behind(&self, class: &Class, mut behind: Behind) -> Behind {
        if let Class::Read(path) = class {
            behind.extend(
                self.unsettled
                    .iter()
                    .filter(|u| u.multi && u.paths.iter().any(|w| coalesce::sees(path, w)))
                    .map(|u| u.seq),
            );
        }
        behind
    }

    fn write_one(&mut self, seq: u64, outgoing: Outgoing, batch: &mut Vec<u8>) {
        batch.extend_from_slice(&outgoing.frame);
        let xid = i32::from_be_bytes(outgoing.frame[4..8].try_into().expect("4 bytes"));
        let behind = self.behind(&outgoing.class, outgoing.behind);
        // Only a read that may be sent again keeps its frame.
        let frame = if behind.is_empty() {
            Vec::new()
        } else {
            outgoing.frame
        };
        self.pending.push_back(Pending {
            xid,
            seq,
            reply: Reply::One {
                on_reply: outgoing.on_reply,
                behind,
                frame,
            },
        });
    }

    fn write_multi_read(&mut self, seq: u64, reads: Vec<Outgoing>, batch: &mut Vec<u8>) {
        let members: Vec<bundle::Member> = reads
            .into_iter()
            .map(|o| bundle::Member {
                behind: self.behind(&o.class, o.behind),
                kind: o.bundle.expect("bundled reads only"),
                frame: o.frame,
                on_reply: o.on_reply,
            })
            .collect();
        let xid = next_xid(&mut self.next_xid);
        batch.extend_from_slice(&bundle::encode(xid, &members));
        let paths = members
            .iter()
            .filter_map(|m| Class::of(&m.frame, false).path().map(str::to_owned))
            .collect();
        self.unsettled.push(Unsettled {
            seq,
            paths,
            multi: false,
        });
        self.pending.push_back(Pending {
            xid,
            seq,
            reply: Reply::MultiRead(members),
        });
    }

    fn write_multi(&mut self, seq: u64, members: Vec<multi::Member>, batch: &mut Vec<u8>) {
        let xid = next_xid(&mut self.next_xid);
        let mut w = Writer::frame();
        w.int(xid).int(op::MULTI);
        for m in &members {
            // A create2 is answered with its stat from ZooKeeper 3.9, with its path only
            // before (see `settle::multi`).
            w.int(m.opcode()).boolean(false).int(-1);
            w.raw(&m.frame[12..]);
        }
        w.int(-1).boolean(true).int(-1);
        batch.extend_from_slice(&w.finish());
        let paths = members
            .iter()
            .filter_map(|m| match &m.class {
                Class::Delete(p) | Class::Create(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        self.unsettled.push(Unsettled {
            seq,
            paths,
            multi: true,
        });
        self.pending.push_back(Pending {
            xid,
            seq,
            reply: Reply::Multi(members),
        });
    }

    /// The server answered `xid` (`replied`: with a reply, not a loss): what to complete. The
    /// first request pending must carry that xid (the server answers in order). A read
    /// replied to behind a `multi` that failed is queued again at the back: it sees what its
    /// first answer missed.
    pub(super) fn answer(&mut self, xid: i32, replied: bool) -> Result<Due, Malformed> {
        match self.pending.front() {
            Some(p) if p.xid == xid => {}
            Some(p) => return Err(Malformed(format!("reply xid {xid}, expected {}", p.xid))),
            None => return Err(Malformed(format!("reply xid {xid} with none pending"))),
        }
        let pending = self.pending.pop_front().expect("front checked");
        Ok(match pending.reply {
            Reply::One {
                on_reply,
                behind,
                frame,
            } if replied && behind.failed => Due::Again(self.again_at_back(frame, on_reply).err()),
            Reply::One { on_reply, .. } => Due::One(on_reply),
            Reply::Multi(members) => Due::Multi {
                seq: pending.seq,
                members,
            },
            Reply::MultiRead(members) => Due::MultiRead {
                seq: pending.seq,
                members,
            },
        })
    }

    /// The `multi` or `multiRead` `seq` was answered: no longer unsettled.
    pub(super) fn settled(&mut self, seq: u64) {
        self.unsettled.retain(|u| u.seq != seq);
    }

    /// The reads of the `multiRead` `seq` were answered, each with its `T`: settled; those
    /// that saw a `multi` that failed are queued again at the back, the others are returned to
    /// be given their answers. Also returned: those refused (the outbox closed), for
    /// ConnectionLoss.
    pub(super) fn reads_answered<T>(
        &mut self,
        seq: u64,
        reads: Vec<(bundle::Member, T)>,
    ) -> (Vec<(bundle::Member, T)>, Vec<OnReply>) {
        self.settled(seq);
        if reads.iter().all(|(m, _)| !m.behind.failed) {
            return (reads, Vec::new());
        }
        let mut answered = Vec::with_capacity(reads.len());
        let mut refused = Vec::new();
        for (m, answer) in reads {
            if m.behind.failed {
                if let Err(on_reply) = self.again_at_back(m.frame, m.on_reply) {
                    refused.push(on_reply);
                }
            } else {
                answered.push((m, answer));
            }
        }
        (answered, refused)
    }

    /// The `multi` `seq` failed as a whole: its writes go out again one by one, in their
    /// order, ahead of every write queued after them (none went out meanwhile), so each caller
    /// gets what its own request gives; the reads behind it that see what it writes are read
    /// again once answered. Returns the callers refused (the outbox closed), for
    /// ConnectionLoss.
    pub(super) fn multi_failed(&mut self, seq: u64, members: Vec<multi::Member>) -> Vec<OnReply> {
        for p in &mut self.pending {
            match &mut p.reply {
                Reply::One { behind, .. } => behind.fail(seq),
                Reply::MultiRead(reads) => reads.iter_mut().for_each(|m| m.behind.fail(seq)),
                Reply::Multi(_) => {}
            }
        }
        for o in &mut self.queue {
            o.behind.fail(seq);
        }
        self.settled(seq);
        let alone = members.into_iter().map(|m| {
            let class = match m.class {
                Class::Delete(p) | Class::Create(p) => Class::Write(p),
                other => other,
            };
            (m.frame, class, m.on_reply, Behind::default())
        });
        self.queue_first(alone)
    }

    /// The `multiRead` `seq` failed as a whole: its reads go out again one by one, in their
    /// order, ahead of what was queued after them (the writes they could see were held back
    /// meanwhile). Returns the callers refused (the outbox closed), for ConnectionLoss.
    pub(super) fn multi_read_failed(
        &mut self,
        seq: u64,
        members: Vec<bundle::Member>,
    ) -> Vec<OnReply> {
        self.settled(seq);
        let alone = members.into_iter().map(|m| {
            let class = Class::of(&m.frame, false);
            (m.frame, class, m.on_reply, m.behind)
        });
        self.queue_first(alone)
    }

    /// The connection is gone: closes the outbox and takes out every caller of a request in
    /// flight or queued, to be told.
    pub(super) fn drop_connection(&mut self) -> Vec<OnReply> {
        self.open = false;
        self.unsettled.clear();
        let mut callers = Vec::with_capacity(self.pending.len() + self.queue.len());
        for p in self.pending.drain(..) {
            match p.reply {
                Reply::One { on_reply, .. } => callers.push(on_reply),
                Reply::Multi(members) => callers.extend(members.into_iter().map(|m| m.on_reply)),
                Reply::MultiRead(members) => {
                    callers.extend(members.into_iter().map(|m| m.on_reply))
                }
            }
        }
        callers.extend(self.queue.drain(..).map(|o| o.on_reply));
        callers
    }

    /// Queues requests again, in their order, ahead of every request not urgent, each to go
    /// out alone; while closed, returns their callers.
    fn queue_first(
        &mut self,
        requests: impl Iterator<Item = (Vec<u8>, Class, OnReply, Behind)>,
    ) -> Vec<OnReply> {
        if !self.open {
            return requests.map(|(_, _, on_reply, _)| on_reply).collect();
        }
        let at = self.queue.iter().take_while(|o| o.urgent).count();
        for (k, (frame, class, on_reply, behind)) in requests.enumerate() {
            let again = self.again(frame, class, on_reply, behind);
            self.queue.insert(at + k, again);
        }
        Vec::new()
    }

    /// Queues the read `frame` again at the back (see [`Behind`]); gives `on_reply` back
    /// while closed.
    fn again_at_back(&mut self, frame: Vec<u8>, on_reply: OnReply) -> Result<(), OnReply> {
        if !self.open {
            return Err(on_reply);
        }
        let class = Class::of(&frame, false);
        let again = self.again(frame, class, on_reply, Behind::default());
        self.queue.push_back(again);
        Ok(())
    }

    /// A request sent before, to go out again alone with a new xid.
    fn again(
        &mut self,
        mut frame: Vec<u8>,
        class: Class,
        on_reply: OnReply,
        behind: Behind,
    ) -> Outgoing {
        let xid = next_xid(&mut self.next_xid);
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
        Outgoing {
            frame,
            on_reply,
            urgent: false,
            class,
            after: self.written,
            bundle: None,
            behind,
        }
    }
}

fn next_xid(next: &mut i32) -> i32 {
    let xid = *next;
    *next = if xid >= i32::MAX - 1 { 1 } else { xid + 1 };
    xid
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xids_stay_positive_when_they_wrap() {
        let mut next = i32::MAX - 1;
        assert_eq!(next_xid(&mut next), i32::MAX - 1);
        assert_eq!(next_xid(&mut next), 1);
    }
}
