//! The write side: callers queue their requests in an outbox, in the order of their calls,
//! which is the order of execution; whichever caller finds the socket free writes what the
//! outbox holds, so no caller waits for another's write, and a writer thread writes what had
//! to wait for room on the wire.
//!
//! Liveness traffic never waits behind bulk traffic: at most [`MAX_IN_FLIGHT`] requests are on
//! the wire unanswered, the rest wait in the outbox, and a ping or a keepalive sync goes out
//! ahead of them, so its answer waits for no more than that many others.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bundle::{self, ReadKind};
use super::coalesce::{self, Class, Queued, Take};
use super::multi::{read_reply, settle_multi, Member, Unsettled};
use super::{terminal_error, Answer, OnReply, Pending, Shared};
use crate::wire::completion::{self, Completion, Slot};
use crate::wire::events::{Kind, Unwatch};
use crate::wire::jute::{Malformed, Reader, Writer};
use crate::wire::link::{Closer, Sink};
use crate::wire::proto::{op, xid, MAX_FRAME};
use crate::wire::Error;

/// The write side. Requests are queued as pending under this lock as they are written, so the
/// order of the FIFO is the order on the wire.
pub(super) struct Out {
    pub(super) sink: Option<Box<dyn Sink>>,
    pub(super) closer: Option<Closer>,
    /// Bumped whenever a connection is given up, so a late re-arm cannot install a dead one.
    pub(super) generation: u64,
}

/// Requests accepted and not yet written.
pub(super) struct Outbox {
    /// Requests are accepted: a connection is installed and its watches are set again.
    pub(super) open: bool,
    pub(super) next_xid: i32,
    /// In the order they go out: urgent ones at the front, the others in the order of the
    /// calls.
    pub(super) queue: VecDeque<Outgoing>,
    /// The sequence number of the next request written (see [`Pending::seq`]).
    pub(super) written: u64,
    /// The `multi`s of coalesced writes on the wire unanswered. No write of a related node
    /// goes out while there is one (see [`coalesce`]).
    pub(super) unsettled: Vec<Unsettled>,
}

pub(super) struct Outgoing {
    frame: Vec<u8>,
    pub(super) pending: Pending,
    /// Goes out ahead of the others, and even with [`MAX_IN_FLIGHT`] unanswered.
    urgent: bool,
    class: Class,
    /// [`Outbox::written`] when it was queued.
    after: u64,
    /// It may go out in a `multiRead` with the reads written right after it (see [`bundle`]).
    bundle: Option<ReadKind>,
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

thread_local! {
    /// How many [`Cork`]s this thread holds.
    static CORKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// See [`Shared::cork`]. Not `Send`: it counts in its thread's `CORKED`.
pub(crate) struct Cork(Arc<Shared>, std::marker::PhantomData<*const ()>);

impl Drop for Cork {
    fn drop(&mut self) {
        if CORKED.with(|c| {
            c.set(c.get() - 1);
            c.get()
        }) == 0
        {
            self.0.flush();
        }
    }
}

/// How many requests may be on the wire unanswered. The server answers one session's requests
/// one after another, so a request written behind N others waits for all of them: 2,000
/// waiters re-listing after a reconnect once kept a keepalive sync waiting for two seconds,
/// and their holder read `Suspended` on a healthy session. A few hundred keep the server
/// busy all the same.
const MAX_IN_FLIGHT: usize = 256;

/// How often the writer thread looks at the outbox without being told to.
const WRITER_NET: Duration = Duration::from_millis(100);

/// How many bytes one write takes from the outbox at most.
const MAX_BATCH: usize = 256 * 1024;

/// How many queued requests a plan looks at beyond those it takes (see [`coalesce::Wire`]).
const MAX_SCAN: usize = 256;

/// How many writes one `multi` takes at most (also bounded by the client's largest reply).
const MAX_MULTI_OPS: usize = 512;

/// How many bytes of writes one `multi` carries at most: far under the server's
/// `jute.maxbuffer` (1 MiB), which refuses the whole request above it.
const MAX_MULTI_BYTES: usize = 128 * 1024;

impl Shared {
    /// Queues a request in the outbox (ahead of the others if `urgent`): `write` fills its
    /// body, `on_reply` reads the reply. Fails at once with ConnectionLoss while not connected
    /// (the caller decides when to send again; a request queued for a later connection could
    /// run long after its caller gave up). Then writes what the outbox holds, unless another
    /// thread is writing (that one writes it).
    fn queue(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        on_reply: OnReply,
        urgent: bool,
        coalescible: bool,
    ) -> Result<(), (OnReply, Error)> {
        match self.encode(opcode, write) {
            Ok(frame) => self.enqueue_as(frame, on_reply, urgent, coalescible)?,
            Err(e) => return Err((on_reply, e)),
        }
        if CORKED.with(|c| c.get()) == 0 {
            self.flush();
        }
        Ok(())
    }

    /// Until the returned guard drops, requests queued by this thread wait in the outbox;
    /// then they go out, together where they may (one write on the socket, and a `multi`).
    pub(crate) fn cork(self: &Arc<Self>) -> Cork {
        CORKED.with(|c| c.set(c.get() + 1));
        Cork(self.clone(), std::marker::PhantomData)
    }

    /// Queues a request without writing it (the caller calls [`flush`](Self::flush)).
    fn queue_only(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        on_reply: OnReply,
        urgent: bool,
    ) -> Result<(), (OnReply, Error)> {
        match self.encode(opcode, write) {
            Ok(frame) => self.enqueue(frame, on_reply, urgent),
            Err(e) => Err((on_reply, e)),
        }
    }

    /// A request's frame, its xid left 0 (set by [`enqueue`](Self::enqueue)).
    pub(crate) fn encode(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
    ) -> Result<Vec<u8>, Error> {
        let mut w = Writer::frame();
        w.int(0).int(opcode);
        write(&mut w);
        if w.len() > MAX_FRAME {
            return Err(Error::BadArguments(
                "request larger than jute.maxbuffer".into(),
            ));
        }
        Ok(w.finish())
    }

    /// Numbers `frame` (a request with its xid still 0) and puts it in the outbox, without
    /// writing it (the caller calls [`flush`](Self::flush)). Fails at once while not
    /// connected (ConnectionLoss) and once the session is over or closing.
    pub(crate) fn enqueue(
        &self,
        frame: Vec<u8>,
        on_reply: OnReply,
        urgent: bool,
    ) -> Result<(), (OnReply, Error)> {
        self.enqueue_as(frame, on_reply, urgent, false)
    }

    /// [`enqueue`](Self::enqueue); a `coalescible` delete may go out in a `multi` with
    /// others (see [`coalesce`]).
    fn enqueue_as(
        &self,
        frame: Vec<u8>,
        on_reply: OnReply,
        urgent: bool,
        coalescible: bool,
    ) -> Result<(), (OnReply, Error)> {
        let state = self.state.get();
        if state.is_terminated() {
            return Err((on_reply, terminal_error(state)));
        }
        if self.closing.load(Ordering::SeqCst) {
            return Err((on_reply, Error::ClientClosed));
        }
        let coalescible = coalescible && self.config.coalesce;
        self.enqueue_class(frame, on_reply, urgent, coalescible)
            .map_err(|on_reply| (on_reply, Error::ConnectionLoss))
    }

    /// [`enqueue`](Self::enqueue), also while closing (the CloseSession itself); gives
    /// `on_reply` back if not connected.
    pub(super) fn enqueue_any(
        &self,
        frame: Vec<u8>,
        on_reply: OnReply,
        urgent: bool,
    ) -> Result<(), OnReply> {
        self.enqueue_class(frame, on_reply, urgent, false)
    }

    fn enqueue_class(
        &self,
        mut frame: Vec<u8>,
        on_reply: OnReply,
        urgent: bool,
        coalescible: bool,
    ) -> Result<(), OnReply> {
        let class = Class::of(&frame, coalescible);
        let bundle = match class {
            Class::Read(_)
                if !urgent && self.config.coalesce && self.multi_read.load(Ordering::Relaxed) =>
            {
                ReadKind::of(&frame)
            }
            _ => None,
        };
        let mut outbox = self.outbox.lock();
        if !outbox.open {
            return Err(on_reply);
        }
        let xid = next_xid(&mut outbox.next_xid);
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
        let outgoing = Outgoing {
            frame,
            pending: Pending {
                xid,
                on_reply,
                seq: 0,
            },
            urgent,
            class,
            after: outbox.written,
            bundle,
        };
        if urgent {
            outbox.queue.push_front(outgoing);
        } else {
            outbox.queue.push_back(outgoing);
        }
        Ok(())
    }

    /// Writes what the outbox holds (within [`MAX_IN_FLIGHT`]), if no other thread is writing:
    /// then that thread writes it, so no caller ever waits for another's write. Called after
    /// queuing a request. On the I/O thread it leaves the writing to the writer thread: a
    /// write blocks while the server does not read, and the server may be waiting for us to
    /// read what it answered; the I/O thread must go on reading.
    pub(crate) fn flush(&self) {
        if self.io_thread_id.get() == Some(&std::thread::current().id()) {
            self.kick_writer();
            return;
        }
        loop {
            {
                let Some(mut out) = self.out.try_lock() else {
                    return;
                };
                if !self.write_batches(&mut out) {
                    return;
                }
            }
            // Something queued while we wrote, by a caller that found `out` taken, must not
            // wait for the next caller: look again now that `out` is free.
            if !self.ready() {
                return;
            }
        }
    }

    /// Writes batches from the outbox while there are any within the bound; `false` if the
    /// connection failed (the I/O thread sees the socket close and fails the rest).
    fn write_batches(&self, out: &mut Out) -> bool {
        while let Some(batch) = self.next_batch() {
            if !self.write(out, &batch) {
                return false;
            }
        }
        true
    }

    /// Tells the writer thread to write what the outbox holds.
    pub(super) fn kick_writer(&self) {
        self.writer_kick.0.lock().0 = true;
        self.writer_kick.1.notify_one();
    }

    /// Ends the writer thread and waits for it (the I/O thread does, as it ends).
    pub(super) fn stop_writer(&self) {
        self.writer_kick.0.lock().1 = true;
        self.writer_kick.1.notify_one();
        let writer = self.writer.lock().take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }

    /// Takes the next requests to write from the outbox, as pending, and their frames (see
    /// [`coalesce`] for what goes now and what goes together). The I/O thread needs `pending`
    /// for every reply: it is held only to plan and to append.
    fn next_batch(&self) -> Option<Vec<u8>> {
        let mut outbox = self.outbox.lock();
        let mut pending = self.pending.lock();
        let takes = self.plan(&outbox, &pending, usize::MAX);
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
        for (i, outgoing) in outbox.queue.drain(..end).enumerate() {
            if wanted[i] {
                taken.push(Some(outgoing));
            } else {
                taken.push(None);
                left.push_back(outgoing);
            }
        }
        while let Some(outgoing) = left.pop_back() {
            outbox.queue.push_front(outgoing);
        }
        let mut batch = Vec::new();
        let mut takes = takes.into_iter().peekable();
        while let Some(take) = takes.next() {
            let seq = outbox.written;
            outbox.written += 1;
            match take {
                Take::One(i) => {
                    let outgoing = taken[i].take().expect("taken once");
                    // Reads written back to back go out as one `multiRead`.
                    let mut reads = Vec::new();
                    let bundling = self.multi_read.load(Ordering::Relaxed);
                    if let Some(kind) = outgoing.bundle.filter(|_| bundling) {
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
                        batch.extend_from_slice(&outgoing.frame);
                        let on_reply = read_reply(
                            &outbox.unsettled,
                            &outgoing.class,
                            &outgoing.frame,
                            outgoing.pending.on_reply,
                        );
                        pending.push_back(Pending {
                            xid: outgoing.pending.xid,
                            on_reply,
                            seq,
                        });
                        continue;
                    }
                    reads.insert(0, outgoing);
                    let members: Vec<bundle::Member> = reads
                        .into_iter()
                        .map(|o| bundle::Member {
                            on_reply: read_reply(
                                &outbox.unsettled,
                                &o.class,
                                &o.frame,
                                o.pending.on_reply,
                            ),
                            kind: o.bundle.expect("bundled reads only"),
                            frame: o.frame,
                        })
                        .collect();
                    let xid = next_xid(&mut outbox.next_xid);
                    batch.extend_from_slice(&bundle::encode(xid, &members));
                    let paths = members
                        .iter()
                        .filter_map(|m| Class::of(&m.frame, false).path().map(str::to_owned))
                        .collect();
                    outbox.unsettled.push(Unsettled {
                        seq,
                        paths,
                        failed: None,
                    });
                    pending.push_back(Pending {
                        xid,
                        on_reply: bundle::settle(self.me.clone(), seq, members),
                        seq,
                    });
                }
                Take::Multi(run) => {
                    let members: Vec<Member> = run
                        .into_iter()
                        .map(|i| {
                            let outgoing = taken[i].take().expect("taken once");
                            Member {
                                frame: outgoing.frame,
                                class: outgoing.class,
                                on_reply: outgoing.pending.on_reply,
                            }
                        })
                        .collect();
                    let xid = next_xid(&mut outbox.next_xid);
                    let mut w = Writer::frame();
                    w.int(xid).int(op::MULTI);
                    for m in &members {
                        // A create2 is answered with its stat from ZooKeeper 3.9, with its
                        // path only before (see `settle_multi`).
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
                    let failed = Arc::new(AtomicBool::new(false));
                    outbox.unsettled.push(Unsettled {
                        seq,
                        paths,
                        failed: Some(failed.clone()),
                    });
                    pending.push_back(Pending {
                        xid,
                        on_reply: settle_multi(self.me.clone(), seq, failed, members),
                        seq,
                    });
                }
            }
        }
        Some(batch)
    }

    /// What may go out now (at most `limit` takes).
    fn plan(&self, outbox: &Outbox, pending: &VecDeque<Pending>, limit: usize) -> Vec<Take> {
        let unsettled: Vec<&str> = outbox
            .unsettled
            .iter()
            .flat_map(|u| u.paths.iter().map(String::as_str))
            .collect();
        let wire = coalesce::Wire {
            room: MAX_IN_FLIGHT.saturating_sub(pending.len()),
            oldest_unanswered: pending.front().map(|p| p.seq),
            unsettled: &unsettled,
            max_bytes: MAX_BATCH,
            max_ops: MAX_MULTI_OPS,
            max_multi_bytes: MAX_MULTI_BYTES,
            max_multi_reply: self.config.max_reply,
            max_scan: MAX_SCAN,
        };
        coalesce::plan(&outbox.queue, &wire, limit)
    }

    /// Whether the outbox holds a request that may go out now.
    pub(super) fn ready(&self) -> bool {
        let outbox = self.outbox.lock();
        if outbox.queue.is_empty() {
            return false;
        }
        let pending = self.pending.lock();
        !self.plan(&outbox, &pending, 1).is_empty()
    }

    /// The `multi` or `multiRead` `id` was answered: no longer unsettled.
    pub(super) fn settled(&self, outbox: &mut Outbox, id: u64) {
        outbox.unsettled.retain(|u| u.seq != id);
    }

    /// The reads of the `multiRead` `id` that failed as a whole go out again one by one, in
    /// their order, ahead of what was queued after them (the writes they could see were held
    /// back meanwhile).
    pub(super) fn read_alone(&self, id: u64, members: Vec<bundle::Member>) {
        let mut outbox = self.outbox.lock();
        self.settled(&mut outbox, id);
        let alone = members.into_iter().map(|m| {
            let class = Class::of(&m.frame, false);
            (m.frame, class, m.on_reply)
        });
        self.queue_first(outbox, alone);
    }

    /// Queues requests again, in their order, ahead of every request not urgent, each to go
    /// out alone; while not connected each gets ConnectionLoss.
    pub(super) fn queue_first(
        &self,
        mut outbox: parking_lot::MutexGuard<'_, Outbox>,
        requests: impl Iterator<Item = (Vec<u8>, Class, OnReply)>,
    ) {
        if !outbox.open {
            drop(outbox);
            for (_, _, on_reply) in requests {
                let _ = on_reply(Answer::Lost(Error::ConnectionLoss));
            }
            return;
        }
        let at = outbox.queue.iter().take_while(|o| o.urgent).count();
        for (k, (frame, class, on_reply)) in requests.enumerate() {
            let again = again(&mut outbox, frame, class, on_reply);
            outbox.queue.insert(at + k, again);
        }
    }

    /// Queues the read `frame` again (see `redo_if_failed` in `multi.rs`), at the back: it sees what its
    /// first answer missed.
    pub(super) fn read_again(&self, frame: Vec<u8>, on_reply: OnReply) {
        let class = Class::of(&frame, false);
        let refused = {
            let mut outbox = self.outbox.lock();
            if outbox.open {
                let again = again(&mut outbox, frame, class, on_reply);
                outbox.queue.push_back(again);
                None
            } else {
                Some(on_reply)
            }
        };
        if let Some(on_reply) = refused {
            let _ = on_reply(Answer::Lost(Error::ConnectionLoss));
        }
    }

    /// Writes a frame. A failed write gives the connection up: part of the frame may have
    /// gone out, so the requests in flight, this one included, end with ConnectionLoss when
    /// the I/O thread sees the socket close.
    pub(super) fn write(&self, out: &mut Out, frame: &[u8]) -> bool {
        let Some(sink) = out.sink.as_mut() else {
            return false;
        };
        if sink.send(frame).is_ok() {
            *self.last_send.lock() = Instant::now();
            return true;
        }
        if let Some(closer) = &out.closer {
            closer.close();
        }
        out.sink = None;
        false
    }

    /// Sends a request and returns the completion that `decode` fills from its reply.
    pub(crate) fn request<T: Send + 'static>(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
            + Send
            + 'static,
    ) -> Completion<T> {
        self.request_as(opcode, false, write, decode)
    }

    /// As [`request`](Self::request); an `urgent` one goes out ahead of every request not yet
    /// written (for liveness checks, whose order relative to other requests does not matter).
    pub(crate) fn request_as<T: Send + 'static>(
        &self,
        opcode: i32,
        urgent: bool,
        write: impl FnOnce(&mut Writer),
        decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
            + Send
            + 'static,
    ) -> Completion<T> {
        self.request_in(opcode, urgent, false, write, decode)
    }

    /// As [`request`](Self::request), for a delete of one of our own nodes that may go out in
    /// a `multi` with other such deletes (see [`coalesce`]): its caller gets what its own
    /// request would have given.
    pub(crate) fn request_coalescible<T: Send + 'static>(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
            + Send
            + 'static,
    ) -> Completion<T> {
        self.request_in(opcode, false, true, write, decode)
    }

    pub(crate) fn request_in<T: Send + 'static>(
        &self,
        opcode: i32,
        urgent: bool,
        coalescible: bool,
        write: impl FnOnce(&mut Writer),
        decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
            + Send
            + 'static,
    ) -> Completion<T> {
        let (slot, completion) = completion::pair();
        let on_reply = reply_into(slot, decode);
        if let Err((on_reply, err)) = self.queue(opcode, write, on_reply, urgent, coalescible) {
            let _ = on_reply(Answer::Lost(err));
        }
        completion
    }

    /// Sends a ping, unless a caller is writing right now (then there is traffic anyway, and
    /// the I/O thread must not wait for a write the server may not be reading). It goes
    /// ahead of what waits in the outbox. `false` if the connection is gone.
    pub(super) fn send_ping(&self) -> bool {
        let Some(mut out) = self.out.try_lock() else {
            return true;
        };
        if out.sink.is_none() {
            // Not installed yet (the re-arm thread is on its way), or given up, which the
            // reader learns from the socket itself.
            return true;
        }
        let mut w = Writer::frame();
        w.int(xid::PING).int(op::PING);
        let sent = self.write(&mut out, &w.finish());
        drop(out);
        // A request queued meanwhile found `out` taken, and left its writing to us.
        if self.ready() {
            self.kick_writer();
        }
        sent
    }
}

impl Unwatch for Shared {
    /// Removes the server's watch when its last watcher goes (its reply is not awaited;
    /// `NoWatcher`, fired meanwhile, is as good as done).
    fn unwatch(&self, key: &(String, Kind), id: u64) {
        {
            let mut watches = self.watches.lock();
            let Some(removal) = watches.unregister(key, id) else {
                return;
            };
            // Queued under the registry's lock, as a request setting the watch again is (see
            // `Client::watching`): that one is queued either before (then the registry keeps
            // the removal back) or after this one, never between the decision and the
            // removal. Between, the removal would take the new watch off the server, and its
            // watcher would wait forever: a waiter dropping its old watch on the runtime
            // thread while it watches the same node anew after a reconnect did that.
            let queued = self.queue_only(
                op::REMOVE_WATCHES,
                |w| {
                    w.string(&removal.path).int(removal.kind.remove_type());
                },
                Box::new(|_| Ok(())),
                false,
            );
            drop(queued); // Not connected: the watch is not set again on the next connection.
        }
        self.flush();
    }
}

/// A request sent before, to go out again alone with a new xid.
fn again(outbox: &mut Outbox, mut frame: Vec<u8>, class: Class, on_reply: OnReply) -> Outgoing {
    let xid = next_xid(&mut outbox.next_xid);
    frame[4..8].copy_from_slice(&xid.to_be_bytes());
    Outgoing {
        frame,
        pending: Pending {
            xid,
            on_reply,
            seq: 0,
        },
        urgent: false,
        class,
        after: outbox.written,
        bundle: None,
    }
}

fn next_xid(next: &mut i32) -> i32 {
    let xid = *next;
    *next = if xid >= i32::MAX - 1 { 1 } else { xid + 1 };
    xid
}

/// An `OnReply` that decodes with `decode` into `slot`.
fn reply_into<T: Send + 'static>(
    slot: Slot<T>,
    decode: impl FnOnce(i32, Reader<'_>, &Arc<Shared>) -> Result<Result<T, Error>, Malformed>
        + Send
        + 'static,
) -> OnReply {
    Box::new(move |answer| match answer {
        Answer::Lost(err) => {
            slot.fill(Err(err));
            Ok(())
        }
        Answer::Reply {
            err, body, shared, ..
        } => match decode(err, body, shared) {
            Ok(value) => {
                slot.fill(value);
                Ok(())
            }
            Err(malformed) => {
                slot.fill(Err(Error::ConnectionLoss));
                Err(malformed)
            }
        },
    })
}

/// The writer thread: writes what waits in the outbox once replies make room for it (the I/O
/// thread, which reads them, must not write; callers write only as they queue), until the
/// I/O thread stops it.
pub(super) fn write_queued(shared: Arc<Shared>) {
    loop {
        {
            let mut kick = shared.writer_kick.0.lock();
            while !kick.0 && !kick.1 {
                // Woken by a kick. The timeout is a safety net: were a kick ever missed, the
                // requests left in the outbox would go out a moment later, not never.
                if shared
                    .writer_kick
                    .1
                    .wait_for(&mut kick, WRITER_NET)
                    .timed_out()
                    && shared.ready()
                {
                    break;
                }
            }
            if kick.1 {
                return;
            }
            kick.0 = false;
        }
        loop {
            let written = shared.write_batches(&mut shared.out.lock());
            // Looked at with `out` free: a caller that found it taken left its request to us.
            if !written || !shared.ready() {
                break;
            }
        }
    }
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
