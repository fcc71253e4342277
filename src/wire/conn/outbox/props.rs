//! The outbox's order, checked from the callers' side: random callers queue reads and writes
//! of related and unrelated nodes, a model server executes what goes on the wire in order and
//! answers it, fails `multi`s and `multiRead`s as a whole, answers over the reply limit, and
//! drops the connection. No socket and no thread: the [`Outbox`] is driven step by step
//! through its interface (queue, take a batch, an answer, a failed batch through the reply
//! handlers, a dropped connection), as the callers, the writer and the I/O thread drive it.
//!
//! What the callers must see, whatever the server does:
//! - every request is answered exactly once, and none waits for ever once the server answers;
//! - a caller's writes of related nodes apply in the order of its calls;
//! - a read sees every write its caller queued before it that it can see;
//! - no read sees a write queued after it (by any caller), but for one case the design gives
//!   up (see [`check`]);
//! - the planner holds nothing back for no reason: the first write goes out unless it is
//!   related to a `multi` or `multiRead` still unanswered (or waits for the replies queued
//!   before it), and a read goes out unless it may see (or, if it may be bundled, relates
//!   to) a write left ahead of it.
//!
//! The relations are written here again, apart from the planner's, so that a change to the
//! planner's cannot change what is checked.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proptest::prelude::*;

use super::super::io_thread::complete;
use super::super::{coalesce, Answer, Config, OnReply, Shared};
use super::{Outbox, MAX_IN_FLIGHT};
use crate::wire::error::Error;
use crate::wire::events::KeeperState;
use crate::wire::jute::{Reader, Writer};
use crate::wire::proto::{op, Stat};

/// The nodes requests name: parents and children, siblings, a grandchild, and an unrelated
/// tree.
const PATHS: [&str; 6] = ["/a", "/a/x", "/a/y", "/a/x/c", "/b", "/b/x"];

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "",
    }
}

/// A read of `read` shows a write of `written`: the node itself, or its parent's children.
fn sees(read: &str, written: &str) -> bool {
    read == written || parent(written) == read
}

/// The same node, or parent and child.
fn related(a: &str, b: &str) -> bool {
    a == b || parent(a) == b || parent(b) == a
}

/// A request a caller makes: `kind` (see [`Req::frame`]) on `PATHS[path]`.
#[derive(Debug, Clone, Copy)]
struct Spec {
    kind: u8,
    path: u8,
}

const KINDS: u8 = 9;

#[derive(Debug, Clone)]
struct Req {
    caller: usize,
    /// Which of its caller's bursts.
    burst: usize,
    path: String,
    write: bool,
    /// How many writes the server had applied when it was queued.
    queued_at: usize,
}

impl Spec {
    /// The request's frame (xid 0), whether it is a write, whether it may be coalesced, and
    /// the path the order rules see (a lock-node create's, before its sequence number).
    fn frame(self, shared: &Shared, id: u64, caller: usize) -> (Vec<u8>, bool, bool, String) {
        let node = PATHS[self.path as usize % PATHS.len()];
        let data = id.to_be_bytes();
        let create = format!("{node}/_c_{caller}-lock-");
        let (opcode, write, coalescible, path) = match self.kind % KINDS {
            0 => (op::GET_DATA, false, false, node.to_owned()),
            1 => (op::GET_CHILDREN2, false, false, node.to_owned()),
            2 => (op::EXISTS, false, false, node.to_owned()),
            // A read that sets a watch: never bundled.
            3 => (op::GET_DATA, false, false, node.to_owned()),
            4 => (op::SET_DATA, true, false, node.to_owned()),
            5 => (op::DELETE, true, true, node.to_owned()),
            6 => (op::DELETE, true, false, node.to_owned()),
            7 => (op::CREATE2, true, true, create),
            _ => (op::CREATE2, true, false, create),
        };
        let kind = self.kind % KINDS;
        let frame = shared
            .encode(opcode, |w| {
                w.string(&path);
                match opcode {
                    op::DELETE => {
                        w.int(id as i32);
                    }
                    op::SET_DATA => {
                        w.buffer(&data).int(-1);
                    }
                    op::CREATE2 => {
                        w.buffer(&data).int(0).int(2);
                    }
                    _ => {
                        w.boolean(kind == 3 || opcode == op::EXISTS);
                    }
                }
            })
            .expect("small frame");
        (frame, write, coalescible, path)
    }
}

/// What a caller was told.
#[derive(Debug, Clone)]
enum Told {
    /// The server's answer: its error and the zxid of the reply (the model server's count of
    /// writes applied when it executed the request).
    Reply {
        err: i32,
        zxid: i64,
    },
    Lost,
}

/// What the harness does next.
#[derive(Debug, Clone)]
enum Step {
    /// A caller queues its next burst, if all of its last one was answered.
    Call(usize),
    /// The writer writes all the planner lets out.
    Write,
    /// The server executes and answers up to `n` requests of the wire, `fault` choosing what
    /// happens to each (see [`Harness::answer`]).
    Answer { n: usize, fault: u8 },
    /// The server executes `k` requests whose answers are lost, and the connection drops.
    Drop(usize),
    /// A new connection is up.
    Reconnect,
}

/// A `multi` or `multiRead` on the wire, unanswered.
struct Batch {
    xid: i32,
    paths: Vec<String>,
}

struct Harness {
    shared: Arc<Shared>,
    /// Every request queued, by id (its place in the order of the calls).
    reqs: Vec<Req>,
    told: Arc<Mutex<HashMap<u64, Vec<Told>>>>,
    /// The frames written and not yet executed, in order.
    wire: VecDeque<Vec<u8>>,
    /// The write ids the server applied, in order (a `multi`'s in its order).
    log: Vec<u64>,
    unsettled: Vec<Batch>,
    /// Per write id applied, the members of `multi`s that failed as a whole.
    failed_multis: Vec<(usize, Vec<String>)>,
    connected: bool,
    scripts: Vec<Vec<Vec<Spec>>>,
    /// Per caller: its next burst, and the ids of the last one.
    next_burst: Vec<usize>,
    last_burst: Vec<Vec<u64>>,
}

fn new_shared() -> Arc<Shared> {
    let config = Config {
        hosts: Vec::new(),
        resolver: Arc::new(crate::wire::hosts::SystemResolver),
        session_timeout: Duration::from_secs(10),
        max_reply: 1 << 20,
        coalesce: true,
        auth: Vec::new(),
        #[cfg(feature = "tls")]
        tls: None,
        #[cfg(feature = "sasl")]
        sasl: None,
    };
    let shared = Shared::new(
        config,
        1,
        Vec::new(),
        Duration::from_secs(10),
        String::new(),
    );
    shared.outbox.lock().open();
    shared.state.set(KeeperState::SyncConnected);
    shared
}

fn stat(zxid: i64) -> Stat {
    Stat {
        mzxid: zxid,
        ..Stat::default()
    }
}

/// The frames of `batch`, each without its length prefix.
fn split(batch: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at < batch.len() {
        let len = i32::from_be_bytes(batch[at..at + 4].try_into().unwrap()) as usize;
        frames.push(batch[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
    frames
}

/// A write's id and path, read from its body (the id is in its data, or a delete's version).
fn write_of(opcode: i32, r: &mut Reader<'_>) -> (u64, String) {
    let path = r.string().unwrap();
    let id = match opcode {
        op::DELETE => r.int().unwrap() as u32 as u64,
        op::SET_DATA => {
            let id = u64::from_be_bytes(r.buffer().unwrap().try_into().unwrap());
            r.int().unwrap();
            id
        }
        op::CREATE2 => {
            let id = u64::from_be_bytes(r.buffer().unwrap().try_into().unwrap());
            assert_eq!(r.int().unwrap(), 0, "no ACL");
            r.int().unwrap();
            id
        }
        other => panic!("op {other} is no write"),
    };
    (id, path)
}

impl Harness {
    fn new(scripts: Vec<Vec<Vec<Spec>>>) -> Harness {
        let callers = scripts.len();
        Harness {
            shared: new_shared(),
            reqs: Vec::new(),
            told: Arc::new(Mutex::new(HashMap::new())),
            wire: VecDeque::new(),
            log: Vec::new(),
            unsettled: Vec::new(),
            failed_multis: Vec::new(),
            connected: true,
            scripts,
            next_burst: vec![0; callers],
            last_burst: vec![Vec::new(); callers],
        }
    }

    fn on_reply(&self, id: u64) -> OnReply {
        let told = self.told.clone();
        Box::new(move |answer| {
            let t = match answer {
                Answer::Reply { err, zxid, .. } => Told::Reply { err, zxid },
                Answer::Lost(_) => Told::Lost,
            };
            told.lock().entry(id).or_default().push(t);
            Ok(())
        })
    }

    fn call(&mut self, caller: usize) {
        let told = self.told.lock();
        if self.last_burst[caller]
            .iter()
            .any(|id| !told.contains_key(id))
        {
            return;
        }
        drop(told);
        let burst = self.next_burst[caller];
        let Some(specs) = self.scripts[caller].get(burst).cloned() else {
            return;
        };
        self.next_burst[caller] += 1;
        self.last_burst[caller].clear();
        for spec in specs {
            let id = self.reqs.len() as u64;
            let (frame, write, coalescible, path) = spec.frame(&self.shared, id, caller);
            self.reqs.push(Req {
                caller,
                burst,
                path,
                write,
                queued_at: self.log.len(),
            });
            self.last_burst[caller].push(id);
            let on_reply = self.on_reply(id);
            if let Err((on_reply, e)) = self.shared.enqueue_as(frame, on_reply, false, coalescible)
            {
                let _ = on_reply(Answer::Lost(e));
            }
        }
    }

    /// Writes what the planner lets out, then checks it held nothing back for no reason.
    fn write(&mut self) -> Result<(), TestCaseError> {
        if !self.connected {
            return Ok(());
        }
        loop {
            let taken = self.shared.outbox.lock().take(true);
            let Some(batch) = taken else { break };
            for frame in split(&batch) {
                let mut r = Reader::new(&frame);
                let xid = r.int().unwrap();
                let opcode = r.int().unwrap();
                let paths = match opcode {
                    op::MULTI => ops(&mut r)
                        .into_iter()
                        .map(|(opcode, body)| write_of(opcode, &mut Reader::new(&body)).1)
                        .collect(),
                    op::MULTI_READ => ops(&mut r)
                        .into_iter()
                        .map(|(_, body)| Reader::new(&body).string().unwrap())
                        .collect(),
                    _ => Vec::new(),
                };
                if !paths.is_empty() {
                    self.unsettled.push(Batch { xid, paths });
                }
                self.wire.push_back(frame);
            }
        }
        self.nothing_held_for_no_reason()
    }

    fn nothing_held_for_no_reason(&self) -> Result<(), TestCaseError> {
        let outbox: &Outbox = &self.shared.outbox.lock();
        let room = MAX_IN_FLIGHT.saturating_sub(outbox.pending.len());
        let oldest = outbox.pending.front().map(|p| p.seq);
        let unsettled: Vec<&str> = self
            .unsettled
            .iter()
            .flat_map(|b| b.paths.iter().map(String::as_str))
            .collect();
        let mut writes_ahead: Vec<&str> = Vec::new();
        for (i, o) in outbox.queue.iter().enumerate().take(room.min(200)) {
            match &o.class {
                coalesce::Class::Read(path) => {
                    let waits: fn(&str, &str) -> bool =
                        if o.bundle.is_some() { related } else { sees };
                    prop_assert!(
                        writes_ahead.iter().any(|w| waits(path, w)),
                        "a read of {path} at {i} waits for no write ahead of it ({writes_ahead:?})"
                    );
                }
                class => {
                    let path = class.path().expect("no other kind is queued here");
                    let busy = matches!(
                        class,
                        coalesce::Class::Delete(_) | coalesce::Class::Create(_)
                    ) && oldest.is_some_and(|s| s < o.after);
                    prop_assert!(
                        i > 0 || busy || unsettled.iter().any(|u| related(u, path)),
                        "the first write, of {path}, waits for nothing (unsettled: {unsettled:?})"
                    );
                    writes_ahead.push(path);
                }
            }
        }
        Ok(())
    }

    /// Executes the next frame on the wire and answers it; `fault`: 5 or 6 fails a `multi` as
    /// a whole (and answers a `multiRead` over the limit), 7 answers over the limit; anything
    /// else answers. `deliver` false: the answer is lost with the connection.
    fn answer(&mut self, fault: u8, deliver: bool) {
        let Some(frame) = self.wire.pop_front() else {
            return;
        };
        let mut r = Reader::new(&frame);
        let xid = r.int().unwrap();
        let opcode = r.int().unwrap();
        let too_large = fault == 7 || (opcode == op::MULTI_READ && matches!(fault, 5 | 6));
        let fail = opcode == op::MULTI && matches!(fault, 5 | 6);
        let mut w = Writer::frame();
        let mut err = 0;
        match opcode {
            op::GET_DATA | op::EXISTS | op::GET_CHILDREN2 => {
                let zxid = self.log.len() as i64;
                if opcode == op::GET_DATA {
                    w.buffer(b"");
                }
                if opcode == op::GET_CHILDREN2 {
                    w.strings(&[] as &[String]);
                }
                w.record(&stat(zxid));
            }
            op::SET_DATA | op::DELETE | op::CREATE2 => {
                let (id, path) = write_of(opcode, &mut r);
                self.log.push(id);
                match opcode {
                    op::SET_DATA => {
                        w.record(&stat(self.log.len() as i64));
                    }
                    op::CREATE2 => {
                        w.string(&format!("{path}0000000001"));
                        w.record(&stat(self.log.len() as i64));
                    }
                    _ => {}
                }
            }
            op::MULTI => {
                let members = ops(&mut r);
                if fail {
                    err = -101;
                    for (k, _) in members.iter().enumerate() {
                        let code = if k == 0 { -101 } else { -2 };
                        w.int(op::ERROR).boolean(false).int(code).int(code);
                    }
                    let paths = members
                        .iter()
                        .map(|(opcode, body)| write_of(*opcode, &mut Reader::new(body)).1)
                        .collect();
                    self.failed_multis.push((self.log.len(), paths));
                } else {
                    let zxid = self.log.len() as i64 + members.len() as i64;
                    for (opcode, body) in &members {
                        let (id, path) = write_of(*opcode, &mut Reader::new(body));
                        self.log.push(id);
                        w.int(*opcode).boolean(false).int(0);
                        if *opcode == op::CREATE2 {
                            w.string(&format!("{path}0000000001"));
                            w.record(&stat(zxid));
                        }
                    }
                }
                w.int(-1).boolean(true).int(-1);
            }
            op::MULTI_READ => {
                let zxid = self.log.len() as i64;
                for (opcode, _) in ops(&mut r) {
                    w.int(opcode).boolean(false).int(0);
                    if opcode == op::GET_CHILDREN {
                        w.strings(&[] as &[String]);
                    } else {
                        w.buffer(b"");
                        w.record(&stat(zxid));
                    }
                }
                w.int(-1).boolean(true).int(-1);
            }
            other => panic!("op {other} on the wire"),
        }
        if !deliver {
            return;
        }
        self.unsettled.retain(|b| b.xid != xid);
        let body = w.finish();
        let due = self.shared.outbox.lock().answer(xid, !too_large);
        let due = due.expect("answers in the order of the wire");
        let answer = if too_large {
            Answer::Lost(Error::ReplyTooLarge {
                size: 2 << 20,
                limit: 1 << 20,
            })
        } else {
            Answer::Reply {
                err,
                zxid: self.log.len() as i64,
                body: Reader::new(&body[4..]),
                learned: &self.shared.learned,
            }
        };
        complete(&self.shared, due, answer).expect("well formed");
    }

    fn drop_connection(&mut self, executed: usize) {
        for _ in 0..executed {
            self.answer(0, false);
        }
        self.wire.clear();
        self.unsettled.clear();
        self.shared.disconnected();
        self.connected = false;
    }

    fn reconnect(&mut self) {
        if !self.connected {
            self.shared.outbox.lock().open();
            self.shared.state.set(KeeperState::SyncConnected);
            self.connected = true;
        }
    }

    fn run(&mut self, steps: &[Step]) -> Result<(), TestCaseError> {
        for step in steps {
            match *step {
                Step::Call(caller) => self.call(caller % self.scripts.len()),
                Step::Write => self.write()?,
                Step::Answer { n, fault } => {
                    for k in 0..n {
                        self.answer(fault.wrapping_add(k as u8 * 3) % 16, true);
                    }
                }
                Step::Drop(k) => self.drop_connection(k),
                Step::Reconnect => self.reconnect(),
            }
        }
        // The server answers everything from now on: all must drain.
        self.reconnect();
        for _ in 0..1000 {
            self.write()?;
            if self.wire.is_empty() {
                break;
            }
            while !self.wire.is_empty() {
                self.answer(0, true);
            }
        }
        let drained = {
            let outbox = self.shared.outbox.lock();
            outbox.queue.is_empty() && outbox.pending.is_empty()
        };
        prop_assert!(
            drained,
            "requests left unanswered with the server answering everything"
        );
        self.check()
    }

    /// The callers' view (see the module's documentation).
    fn check(&self) -> Result<(), TestCaseError> {
        let told = self.told.lock();
        let mut at: HashMap<u64, usize> = HashMap::new();
        for (k, id) in self.log.iter().enumerate() {
            prop_assert!(at.insert(*id, k).is_none(), "write {id} applied twice");
        }
        for (id, req) in self.reqs.iter().enumerate() {
            let id = id as u64;
            let answers = told.get(&id).map_or(0, Vec::len);
            prop_assert_eq!(
                answers,
                1,
                "request {} ({:?}) answered {} times",
                id,
                req,
                answers
            );
            let answer = &told[&id][0];
            if req.write {
                if let Told::Reply { err: 0, .. } = answer {
                    prop_assert!(at.contains_key(&id), "write {} answered, not applied", id);
                }
            }
        }
        for (a, ra) in self.reqs.iter().enumerate() {
            for (b, rb) in self.reqs.iter().enumerate().skip(a + 1) {
                let (a, b) = (a as u64, b as u64);
                let own = ra.caller == rb.caller;
                // A caller's writes apply in the order of its calls: those of one burst that
                // are related, those of bursts one after another all.
                if own
                    && ra.write
                    && rb.write
                    && (ra.burst < rb.burst || related(&ra.path, &rb.path))
                {
                    if let (Some(pa), Some(pb)) = (at.get(&a), at.get(&b)) {
                        prop_assert!(
                            pa < pb,
                            "caller {}'s write {} ({}) applied after its later write {} ({})",
                            ra.caller,
                            a,
                            ra.path,
                            b,
                            rb.path
                        );
                    }
                }
                // A read sees the writes its caller queued before it.
                if own && ra.write && !rb.write && sees(&rb.path, &ra.path) {
                    if let (Some(pa), Some(Told::Reply { zxid, .. })) =
                        (at.get(&a), told[&b].first())
                    {
                        prop_assert!(
                            (*pa as i64) < *zxid,
                            "caller {}'s read {} of {} missed its earlier write {} of {}",
                            ra.caller,
                            b,
                            rb.path,
                            a,
                            ra.path
                        );
                    }
                }
                // No write overtakes a read queued before it that would see it; but a read
                // sent again because a `multi` ahead of it that wrote what it sees failed as
                // a whole reads as of its second sending, and may then see a write queued
                // meanwhile (the outbox queues it again at the back).
                let sent_again = |read: &Req, zxid: i64| {
                    self.failed_multis.iter().any(|(at, paths)| {
                        *at >= read.queued_at
                            && (*at as i64) <= zxid
                            && paths.iter().any(|p| sees(&read.path, p))
                    })
                };
                if !ra.write && rb.write && sees(&ra.path, &rb.path) {
                    if let (Some(pb), Some(Told::Reply { zxid, .. })) =
                        (at.get(&b), told[&a].first())
                    {
                        prop_assert!(
                            (*pb as i64) >= *zxid || sent_again(ra, *zxid),
                            "read {} of {} (caller {}) saw write {} of {} (caller {}), queued after it",
                            a,
                            ra.path,
                            ra.caller,
                            b,
                            rb.path,
                            rb.caller
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// The operations of a `multi` or `multiRead` request: each one's opcode and body.
fn ops(r: &mut Reader<'_>) -> Vec<(i32, Vec<u8>)> {
    let mut ops = Vec::new();
    loop {
        let opcode = r.int().unwrap();
        let done = r.boolean().unwrap();
        r.int().unwrap();
        if done {
            return ops;
        }
        let start = r.rest();
        match opcode {
            op::DELETE => {
                r.string().unwrap();
                r.int().unwrap();
            }
            op::CREATE2 => {
                r.string().unwrap();
                r.buffer().unwrap();
                r.int().unwrap();
                r.int().unwrap();
            }
            op::GET_CHILDREN | op::GET_DATA => {
                r.string().unwrap();
                r.boolean().unwrap();
            }
            other => panic!("op {other} in a batch"),
        }
        let body = &start[..start.len() - r.rest().len()];
        ops.push((opcode, body.to_vec()));
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (0..KINDS, 0..PATHS.len() as u8).prop_map(|(kind, path)| Spec { kind, path })
}

/// A caller's burst: most often any requests; else (one in seven) writes that may be coalesced
/// into one `multi`, then reads that may be bundled into one `multiRead` behind it, mostly of
/// the node the writes change. Drawn from all kinds and paths, that burst is rare (two kinds
/// of nine, twice, on related paths, in that order), yet it is the one where a `multi` that
/// fails as a whole must have the reads of the `multiRead` behind it done again.
fn burst() -> impl Strategy<Value = Vec<Spec>> {
    // The kinds that may be coalesced (a delete, a lock-node create) and bundled (getData,
    // getChildren2, neither setting a watch); see `Spec::frame`.
    const COALESCED: [u8; 2] = [5, 7];
    const BUNDLED: [u8; 2] = [0, 1];
    let multi_then_reads = (0..PATHS.len() as u8).prop_flat_map(|node| {
        let path = prop_oneof![3 => Just(node), 1 => 0..PATHS.len() as u8];
        let writes =
            prop::collection::vec((prop::sample::select(&COALESCED[..]), path.clone()), 2..4);
        let reads = prop::collection::vec((prop::sample::select(&BUNDLED[..]), path), 2..4);
        (writes, reads).prop_map(|(writes, reads)| {
            writes
                .into_iter()
                .chain(reads)
                .map(|(kind, path)| Spec { kind, path })
                .collect()
        })
    });
    prop_oneof![
        6 => prop::collection::vec(spec(), 1..5),
        1 => multi_then_reads,
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3usize).prop_map(Step::Call),
        3 => Just(Step::Write),
        4 => (1..4usize, 0..16u8).prop_map(|(n, fault)| Step::Answer { n, fault }),
        1 => (0..3usize).prop_map(Step::Drop),
        1 => Just(Step::Reconnect),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn callers_see_their_order_whatever_the_server_does(
        scripts in prop::collection::vec(
            prop::collection::vec(burst(), 1..5),
            3,
        ),
        steps in prop::collection::vec(step(), 0..80),
    ) {
        Harness::new(scripts).run(&steps)?;
    }
}
