//! Sending requests: callers queue them in the [`Outbox`](super::outbox::Outbox), in the
//! order of their calls, which is the order of execution; whichever caller finds the socket
//! free writes what the outbox lets out, so no caller waits for another's write, and a writer
//! thread writes what had to wait for room on the wire. The outbox's lock is never held
//! across a write: the socket's (`out`) is, from the take to the end of the write, so the
//! order on the wire is the order of the takes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bundle::ReadKind;
use super::coalesce::Class;
use super::reply::Learned;
use super::{terminal_error, Answer, OnReply, Out, Shared};
use crate::wire::completion::{self, Completion, Slot};
use crate::wire::error::Error;
use crate::wire::events::{Unwatch, WatchKind};
use crate::wire::jute::{Malformed, Reader, Writer};
use crate::wire::proto::{op, xid, MAX_FRAME};

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

/// How often the writer thread looks at the outbox without being told to.
const WRITER_NET: Duration = Duration::from_millis(100);

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
    /// others (see [`coalesce`](super::coalesce)).
    pub(super) fn enqueue_as(
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
        frame: Vec<u8>,
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
        self.outbox
            .lock()
            .push(frame, on_reply, urgent, class, bundle)
    }

    /// Writes what the outbox lets out, if no other thread is writing: then that thread
    /// writes it, so no caller ever waits for another's write. Called after
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
        while let Some(batch) = self.take_batch() {
            if !self.write(out, &batch) {
                return false;
            }
        }
        true
    }

    /// Takes the next batch from the outbox (its lock only for that).
    fn take_batch(&self) -> Option<Vec<u8>> {
        let multi_read = self.multi_read.load(Ordering::Relaxed);
        self.outbox.lock().take(multi_read)
    }

    /// Whether the outbox holds a request that may go out now.
    pub(super) fn ready(&self) -> bool {
        self.outbox.lock().ready()
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
        decode: impl FnOnce(i32, Reader<'_>, &Learned) -> Result<Result<T, Error>, Malformed>
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
        decode: impl FnOnce(i32, Reader<'_>, &Learned) -> Result<Result<T, Error>, Malformed>
            + Send
            + 'static,
    ) -> Completion<T> {
        self.request_in(opcode, urgent, false, write, decode)
    }

    /// As [`request`](Self::request), for a delete of one of our own nodes that may go out in
    /// a `multi` with other such deletes (see [`coalesce`](super::coalesce)): its caller gets what its own
    /// request would have given.
    pub(crate) fn request_coalescible<T: Send + 'static>(
        &self,
        opcode: i32,
        write: impl FnOnce(&mut Writer),
        decode: impl FnOnce(i32, Reader<'_>, &Learned) -> Result<Result<T, Error>, Malformed>
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
        decode: impl FnOnce(i32, Reader<'_>, &Learned) -> Result<Result<T, Error>, Malformed>
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
    fn unwatch(&self, key: &(String, WatchKind), id: u64) {
        {
            let mut watches = self.watches.lock();
            let Some(removal) = watches.unregister(key, id) else {
                return;
            };
            // Queued under the registry's lock, as a request setting the watch again is (see
            // `Transport::watching`): that one is queued either before (then the registry keeps
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

/// An `OnReply` that decodes with `decode` into `slot`.
fn reply_into<T: Send + 'static>(
    slot: Slot<T>,
    decode: impl FnOnce(i32, Reader<'_>, &Learned) -> Result<Result<T, Error>, Malformed>
        + Send
        + 'static,
) -> OnReply {
    Box::new(move |answer| match answer {
        Answer::Lost(err) => {
            slot.fill(Err(err));
            Ok(())
        }
        Answer::Reply {
            err, body, learned, ..
        } => match decode(err, body, learned) {
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

impl Shared {
    /// The writer thread: writes what waits in the outbox once replies make room for it (the
    /// I/O thread, which reads them, must not write; callers write only as they queue), until
    /// the I/O thread stops it.
    pub(super) fn write_queued(self: Arc<Self>) {
        let shared = self;
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
}
