//! Property tests of the wire's decoders against whatever a broken or hostile server may send:
//! decoding ends in a value or in `Malformed` (a reset connection), never in a panic; framing
//! never holds more than one maximal frame; a read never keeps its caller waiting on a server
//! that trickles; and what `Writer` writes, `Reader` reads back.
//!
//! Case counts are small on purpose: the whole module runs in about a second.

use std::io;

use proptest::collection::vec;
use proptest::prelude::*;

use super::jute::{Decoded, Reader, Writer};
use super::link::{Frames, Read1, Source};
use super::proto::{self, op, ConnectResponse, MultiResult, Notification, ReplyHeader, Stat};

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        ..ProptestConfig::default()
    }
}

/// One jute field, to write and read back.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Int(i32),
    Long(i64),
    Bool(bool),
    Buffer(Vec<u8>),
    Str(String),
    Strings(Vec<String>),
}

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        any::<i32>().prop_map(Field::Int),
        any::<i64>().prop_map(Field::Long),
        any::<bool>().prop_map(Field::Bool),
        vec(any::<u8>(), 0..40).prop_map(Field::Buffer),
        any::<String>().prop_map(Field::Str),
        vec(any::<String>(), 0..4).prop_map(Field::Strings),
    ]
}

fn write_field(w: &mut Writer, f: &Field) {
    match f {
        Field::Int(v) => w.int(*v),
        Field::Long(v) => w.long(*v),
        Field::Bool(v) => w.boolean(*v),
        Field::Buffer(v) => w.buffer(v),
        Field::Str(v) => w.string(v),
        Field::Strings(v) => w.strings(v),
    };
}

/// Reads a field of the same kind as `like`.
fn read_like(r: &mut Reader<'_>, like: &Field) -> Decoded<Field> {
    Ok(match like {
        Field::Int(_) => Field::Int(r.int()?),
        Field::Long(_) => Field::Long(r.long()?),
        Field::Bool(_) => Field::Bool(r.boolean()?),
        Field::Buffer(_) => Field::Buffer(r.buffer()?.to_vec()),
        Field::Str(_) => Field::Str(r.string()?),
        Field::Strings(_) => Field::Strings(r.strings()?),
    })
}

/// `fields` as one frame's body (no length prefix).
fn body_of(fields: &[Field]) -> Vec<u8> {
    let mut w = Writer::frame();
    for f in fields {
        write_field(&mut w, f);
    }
    w.finish().split_off(4)
}

/// Bytes a server might send as a body: raw noise, or jute fields that look plausible (length
/// prefixes that fit, strings, stats' worth of integers), often cut short.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..160),
        (vec(field(), 0..8), any::<usize>()).prop_map(|(fields, cut)| {
            let mut body = body_of(&fields);
            if cut % 3 == 0 && !body.is_empty() {
                body.truncate(cut % body.len());
            }
            body
        }),
    ]
}

proptest! {
    #![proptest_config(cases(256))]

    /// Any sequence of reads on any bytes: each gives a value or an error, consumes only what
    /// the frame has, and allocates no more than it holds.
    #[test]
    fn reader_survives_any_bytes(bytes in vec(any::<u8>(), 0..128), ops in vec(0u8..7, 0..16)) {
        let mut r = Reader::new(&bytes);
        for op in ops {
            let before = r.remaining();
            match op {
                0 => { let _ = r.int(); }
                1 => { let _ = r.long(); }
                2 => { let _ = r.boolean(); }
                3 => if let Ok(b) = r.buffer() { prop_assert!(b.len() <= before); },
                4 => if let Ok(s) = r.string() { prop_assert!(s.len() <= before); },
                5 => if let Ok(v) = r.strings() {
                    // Each string takes at least its 4-byte length.
                    prop_assert!(v.len() * 4 <= before);
                },
                _ => prop_assert_eq!(r.remaining(), before),
            }
            prop_assert!(r.remaining() <= before);
        }
    }

    /// What the writer writes, the reader reads back, to the last byte; the frame's prefix
    /// is its body's length.
    #[test]
    fn writer_round_trips(fields in vec(field(), 0..12)) {
        let mut w = Writer::frame();
        for f in &fields {
            write_field(&mut w, f);
        }
        let frame = w.finish();
        let len = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        prop_assert_eq!(len as usize, frame.len() - 4);
        let mut r = Reader::new(&frame[4..]);
        for f in &fields {
            prop_assert_eq!(&read_like(&mut r, f).unwrap(), f);
        }
        prop_assert_eq!(r.remaining(), 0);
    }

    /// A record cut anywhere short does not read back: a truncated frame is an error.
    #[test]
    fn truncated_records_are_errors(fields in vec(field(), 1..8), cut in any::<usize>()) {
        let body = body_of(&fields);
        let cut = cut % body.len();
        let mut r = Reader::new(&body[..cut]);
        let read: Decoded<Vec<Field>> = fields.iter().map(|f| read_like(&mut r, f)).collect();
        prop_assert!(read.is_err(), "{} of {} bytes read back", cut, body.len());
    }

    /// The fixed records decode from exactly their size, and anything shorter is an error.
    #[test]
    fn headers_and_stats_need_all_their_bytes(bytes in vec(any::<u8>(), 0..100)) {
        let mut r = Reader::new(&bytes);
        prop_assert_eq!(ReplyHeader::read(&mut r).is_ok(), bytes.len() >= 16);
        let mut r = Reader::new(&bytes);
        match proto::read_stat(&mut r) {
            Ok(_) => prop_assert_eq!(r.remaining(), bytes.len() - 68),
            Err(_) => prop_assert!(bytes.len() < 68),
        }
    }

    /// A ConnectResponse of any bytes: a session password of more than 64 bytes is never
    /// accepted, whatever its announced length.
    #[test]
    fn connect_responses_of_any_bytes(bytes in body(), password_len in any::<i32>()) {
        if let Ok(response) = ConnectResponse::read(&mut Reader::new(&bytes)) {
            prop_assert!(response.password.len() <= 64);
        }
        let mut w = Writer::frame();
        w.int(0).int(4000).long(7).int(password_len);
        w.boolean(false);
        let frame = w.finish();
        let lying = ConnectResponse::read(&mut Reader::new(&frame[4..]));
        prop_assert!(lying.is_err() || password_len == 0 || password_len == -1);
    }

    #[test]
    fn connect_responses_round_trip(
        timeout in any::<i32>(),
        session in any::<i64>(),
        password in vec(any::<u8>(), 0..=64),
        read_only in proptest::option::of(any::<bool>()),
    ) {
        let mut w = Writer::frame();
        w.int(0).int(timeout).long(session).buffer(&password);
        if let Some(flag) = read_only {
            w.boolean(flag);
        }
        let frame = w.finish();
        let response = ConnectResponse::read(&mut Reader::new(&frame[4..])).unwrap();
        prop_assert_eq!(response, ConnectResponse { timeout_ms: timeout, session_id: session, password });
    }

    #[test]
    fn notifications_of_any_bytes(bytes in body(), kind in any::<i32>(), state in any::<i32>(), path in any::<String>()) {
        let _ = Notification::read(&mut Reader::new(&bytes)).map(|n| n.event_type());
        let mut w = Writer::frame();
        w.int(kind).int(state).string(&path);
        let frame = w.finish();
        let note = Notification::read(&mut Reader::new(&frame[4..])).unwrap();
        prop_assert_eq!((note.kind, note.path), (kind, path));
    }

    /// A multi reply of any bytes: at most one result per 9-byte result header it holds.
    #[test]
    fn multi_replies_of_any_bytes(bytes in body()) {
        if let Ok(results) = proto::read_multi(&mut Reader::new(&bytes)) {
            prop_assert!(results.len() * 9 < bytes.len().max(1));
        }
    }

    #[test]
    fn multi_replies_round_trip(results in vec(multi_result(), 0..8)) {
        let mut w = Writer::frame();
        for (kind, result) in &results {
            w.int(*kind).boolean(false).int(0);
            match result {
                MultiResult::Done if *kind == op::SET_DATA => write_stat(&mut w),
                MultiResult::Done => {}
                MultiResult::Created(path, stat) => {
                    w.string(path);
                    if let Some(stat) = stat {
                        w.record(stat);
                    }
                }
                MultiResult::Error(code) => { w.int(*code); }
            }
        }
        w.int(-1).boolean(true).int(-1);
        let frame = w.finish();
        let read = proto::read_multi(&mut Reader::new(&frame[4..])).unwrap();
        let expected: Vec<MultiResult> = results.into_iter().map(|(_, r)| r).collect();
        prop_assert_eq!(read, expected);
    }
}

fn write_stat(w: &mut Writer) {
    w.long(1).long(2).long(3).long(4).int(5).int(6).int(7);
    w.long(8).int(9).int(10).long(11);
}

/// A multi result and the op code it is written under.
fn multi_result() -> impl Strategy<Value = (i32, MultiResult)> {
    prop_oneof![
        prop_oneof![Just(op::CHECK), Just(op::DELETE), Just(op::SET_DATA)]
            .prop_map(|kind| (kind, MultiResult::Done)),
        (
            prop_oneof![
                Just(op::CREATE),
                Just(op::CREATE2),
                Just(op::CREATE_CONTAINER)
            ],
            any::<String>()
        )
            .prop_map(|(kind, path)| {
                let stat = (kind != op::CREATE).then(|| Stat {
                    czxid: 1,
                    pzxid: 11,
                    ..Stat::default()
                });
                (kind, MultiResult::Created(path, stat))
            }),
        any::<i32>().prop_map(|code| (op::ERROR, MultiResult::Error(code))),
    ]
}

/// A source that hands out `data` in chunks of the given sizes, taken in turn (a size of 0 is
/// a read that times out), then times out for ever, or ends the stream if `eof`. Counts its
/// reads.
struct Chunks {
    data: Vec<u8>,
    at: usize,
    sizes: Vec<usize>,
    turn: usize,
    eof: bool,
    reads: usize,
}

impl Chunks {
    fn new(data: Vec<u8>, sizes: Vec<usize>, eof: bool) -> Chunks {
        Chunks {
            data,
            at: 0,
            sizes,
            turn: 0,
            eof,
            reads: 0,
        }
    }

    fn drained(&self) -> bool {
        self.at == self.data.len()
    }

    /// Drained, and with nothing more to report: a source that ends in EOF still has that to
    /// say (the next read returns it).
    fn done(&self) -> bool {
        self.drained() && !self.eof
    }
}

impl Source for Chunks {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reads += 1;
        if self.drained() {
            return if self.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let size = self.sizes[self.turn % self.sizes.len()];
        self.turn += 1;
        if size == 0 {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let n = size.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }

    fn set_timeout(&mut self, _: std::time::Duration) -> io::Result<()> {
        Ok(())
    }
}

/// How a [`Frames`] run over a whole source ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The source was drained and timed out.
    Idle,
    Error(io::ErrorKind),
}

/// Reads every frame `source` holds, checking after each call that the buffer stayed within
/// one frame of `max` (or the initial buffer, if larger).
fn read_all(frames: &mut Frames, source: &mut Chunks, max: usize) -> (Vec<Vec<u8>>, End) {
    let bound = (max + 4).max(64 * 1024);
    let mut got = Vec::new();
    for _ in 0..1_000_000 {
        let result = frames.next(source);
        assert!(
            frames.allocated() <= bound,
            "{} bytes allocated for frames of at most {max}",
            frames.allocated()
        );
        match result {
            Ok(Read1::Frame(frame)) => got.push(frame),
            Ok(Read1::Idle) if source.done() => return (got, End::Idle),
            Ok(Read1::Idle) => {}
            Ok(Read1::Oversized { len, .. }) => panic!("a frame of {len} skipped, not refused"),
            Err(e) => return (got, End::Error(e.kind())),
        }
    }
    panic!("no end after a million reads");
}

fn framed(len: i32, body: &[u8]) -> Vec<u8> {
    let mut v = len.to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

/// One piece of a stream: a frame of `len` bytes of `fill`, or one that announces `len`
/// bytes out of bounds (and is followed by `fill` bytes of it at most).
#[derive(Debug, Clone)]
enum Piece {
    Frame(usize, u8),
    Lying(i32),
}

fn pieces(max: usize) -> impl Strategy<Value = Vec<Piece>> {
    let piece = prop_oneof![
        8 => (0..=max, any::<u8>()).prop_map(|(len, fill)| Piece::Frame(len, fill)),
        1 => prop_oneof![
            ((max as i32 + 1)..=i32::MAX),
            (i32::MIN..0),
        ]
        .prop_map(Piece::Lying),
    ];
    vec(piece, 0..6)
}

/// Read sizes taken in turn (0: a read that times out), `mean` bytes a read at least, so that
/// a long stream takes a bounded number of reads.
fn chunk_sizes(mean: usize) -> impl Strategy<Value = Vec<usize>> {
    vec(
        prop_oneof![
            1 => Just(0usize),
            3 => 1usize..16,
            3 => 1usize..300_000,
        ],
        1..8,
    )
    .prop_filter("reads too small", move |sizes| {
        sizes.iter().sum::<usize>() >= mean * sizes.len()
    })
}

proptest! {
    #![proptest_config(cases(48))]

    /// Frames of any size up to the maximum, split across reads anyhow, come out whole and in
    /// order; a length out of bounds ends the stream with an error before anything is
    /// allocated for it; the buffer never grows past one maximal frame.
    #[test]
    fn frames_come_out_whole_and_bounded(
        (max, pieces) in (1usize..400_000).prop_flat_map(|max| (Just(max), pieces(max))),
        sizes in chunk_sizes(4096),
        eof in any::<bool>(),
    ) {
        let mut data = Vec::new();
        let mut expected = Vec::new();
        let mut lied = false;
        for piece in &pieces {
            match *piece {
                Piece::Frame(len, fill) => {
                    data.extend(framed(len as i32, &vec![fill; len]));
                    if !lied {
                        expected.push(len);
                    }
                }
                Piece::Lying(len) => {
                    data.extend(framed(len, &[0; 100]));
                    lied = true;
                }
            }
        }
        let mut source = Chunks::new(data, sizes, eof);
        let mut frames = Frames::new(max);
        let (got, end) = read_all(&mut frames, &mut source, max);
        let lengths: Vec<usize> = got.iter().map(Vec::len).collect();
        prop_assert_eq!(lengths, expected);
        let expected_end = match (lied, eof) {
            (true, _) => End::Error(io::ErrorKind::InvalidData),
            (false, true) => End::Error(io::ErrorKind::UnexpectedEof),
            (false, false) => End::Idle,
        };
        prop_assert_eq!(end, expected_end);
    }

    /// Any bytes at all: frames or an error, within the buffer's bound.
    #[test]
    fn frames_survive_any_bytes(
        data in vec(any::<u8>(), 0..2048),
        max in 0usize..2048,
        sizes in chunk_sizes(1),
    ) {
        let mut source = Chunks::new(data, sizes, true);
        let (got, end) = read_all(&mut Frames::new(max), &mut source, max);
        prop_assert!(got.iter().all(|f| f.len() <= max));
        prop_assert!(matches!(end, End::Error(_)));
    }

    /// One read at most per call, complete frame or not: a server that trickles a byte per
    /// read cannot keep the caller from its deadline and its liveness checks.
    #[test]
    fn a_call_reads_at_most_once(
        bodies in vec(vec(any::<u8>(), 0..64), 1..6),
        sizes in vec(1usize..8, 1..4),
    ) {
        let data: Vec<u8> = bodies.iter().flat_map(|b| framed(b.len() as i32, b)).collect();
        let mut source = Chunks::new(data, sizes, false);
        let mut frames = Frames::new(1 << 20);
        let mut got = Vec::new();
        while !source.drained() || got.len() < bodies.len() {
            let reads = source.reads;
            if let Read1::Frame(frame) = frames.next(&mut source).unwrap() {
                got.push(frame);
            }
            prop_assert!(source.reads - reads <= 1, "{} reads in one call", source.reads - reads);
        }
        prop_assert_eq!(got, bodies);
    }
}

/// What a reader skipping oversized frames reports of one frame.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Whole(Vec<u8>),
    /// Its first bytes and its length.
    Skipped(Vec<u8>, usize),
}

/// A frame body of `len` bytes counting up from `fill`, so that a misaligned read shows.
fn counting(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

proptest! {
    #![proptest_config(cases(48))]

    /// Skipping oversized frames: each frame within the limit comes out whole and in order;
    /// each one over it is reported once, with its first bytes and its length, and the frames
    /// after it are read as if it had not been there; one read per call; the buffer never
    /// grows past one frame within the limit (or the initial buffer), however large the
    /// skipped frames; every byte received is counted.
    #[test]
    fn oversized_frames_are_skipped_and_the_rest_read(
        max in 16usize..300_000,
        spec in vec((0usize..600_000, any::<u8>()), 0..6),
        sizes in chunk_sizes(4096),
    ) {
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for &(len, fill) in &spec {
            let body = counting(len, fill);
            data.extend(framed(len as i32, &body));
            expected.push(if len <= max {
                Seen::Whole(body)
            } else {
                Seen::Skipped(body[..super::link::OVERSIZED_HEAD].to_vec(), len)
            });
        }
        let total = data.len() as u64;
        let mut source = Chunks::new(data, sizes, false);
        let mut frames = Frames::new(max);
        frames.skip_oversized(max);
        let bound = (max + 4).max(64 * 1024);
        let mut got = Vec::new();
        for _ in 0..1_000_000 {
            let reads = source.reads;
            let read = frames.next(&mut source).unwrap();
            prop_assert!(source.reads - reads <= 1, "{} reads in one call", source.reads - reads);
            prop_assert!(frames.allocated() <= bound, "{} bytes allocated", frames.allocated());
            match read {
                Read1::Frame(frame) => got.push(Seen::Whole(frame)),
                Read1::Oversized { head, len } => got.push(Seen::Skipped(head, len)),
                Read1::Idle if source.done() => break,
                Read1::Idle => {}
            }
        }
        prop_assert_eq!(got, expected);
        prop_assert_eq!(frames.received(), total);
    }
}

#[test]
fn a_length_prefix_alone_allocates_nothing() {
    // A frame announced at the limit, of which only a few bytes came: the buffer stays as it
    // was, rather than taking what the prefix announces.
    let max = 16 << 20;
    let mut data = framed(max as i32, &[1; 100]);
    data.truncate(104);
    let mut source = Chunks::new(data, vec![1 << 20], false);
    let mut frames = Frames::new(max);
    for _ in 0..3 {
        assert!(matches!(frames.next(&mut source).unwrap(), Read1::Idle));
    }
    assert_eq!(frames.allocated(), 64 * 1024);
}

/// The reply decoders of every [`Transport`](super::Transport) call, fed through a real session: a
/// server on loopback answers each call with a header and any body. The call must end (a
/// value, a server error, or a connection loss when the body does not decode), and the
/// session must live on: the next well-formed reply is read, on this connection or the next.
/// A panic on the I/O thread would leave that reply unread.
mod client_replies {
    use std::collections::VecDeque;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::super::proto::op;
    use super::super::transport::{Connector, Transport};
    use super::super::{CreateMode, Error, KeeperState, TxnRequest, OPEN_ACL};
    use super::{body, cases};
    use crate::rt::runtime::block_on;

    /// What the server answers the next ordinary request with, after the request's xid.
    type Script = Arc<Mutex<VecDeque<Vec<u8>>>>;

    struct Server {
        addr: String,
        script: Script,
        connections: Arc<AtomicUsize>,
    }

    impl Server {
        /// The server's address as a connect string's hosts.
        fn hosts(&self) -> Vec<crate::wire::Host> {
            crate::wire::parse_connect_string(&self.addr, false)
                .unwrap()
                .hosts
        }

        fn start() -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let script = Script::default();
            let connections = Arc::new(AtomicUsize::new(0));
            let (s, c) = (script.clone(), connections.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { return };
                    c.fetch_add(1, Ordering::SeqCst);
                    let script = s.clone();
                    std::thread::spawn(move || {
                        let _ = serve(stream, &script);
                    });
                }
            });
            Server {
                addr,
                script,
                connections,
            }
        }
    }

    fn read_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        let mut len = [0; 4];
        stream.read_exact(&mut len)?;
        let mut body = vec![0; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut body)?;
        Ok(body)
    }

    fn send(stream: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        stream.write_all(&frame)
    }

    /// Grants the session the client asks for (a new one: id 0x5eed), then answers pings and
    /// the requests the session sends by itself with an empty success, every other request
    /// with the script's next reply (a valid `exists` reply once the script is empty).
    fn serve(mut stream: TcpStream, script: &Script) -> std::io::Result<()> {
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        let connect = read_frame(&mut stream)?;
        let timeout = &connect[12..16];
        let session = match &connect[16..24] {
            [0, 0, 0, 0, 0, 0, 0, 0] => 0x5eed_i64.to_be_bytes().to_vec(),
            id => id.to_vec(),
        };
        let mut response = vec![0, 0, 0, 0];
        response.extend_from_slice(timeout);
        response.extend(session);
        response.extend([0, 0, 0, 16]);
        response.extend([7; 16]);
        response.push(0);
        send(&mut stream, &response)?;
        loop {
            let request = read_frame(&mut stream)?;
            let xid = &request[0..4];
            let opcode = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
            let mut reply = xid.to_vec();
            let scripted = match opcode {
                op::PING | op::SET_WATCHES | op::REMOVE_WATCHES | op::CLOSE_SESSION => None,
                _ => script.lock().unwrap().pop_front(),
            };
            match scripted {
                Some(rest) => reply.extend(rest),
                None => {
                    reply.extend(1_i64.to_be_bytes()); // zxid
                    reply.extend(0_i32.to_be_bytes()); // ok
                    if opcode == op::EXISTS {
                        reply.extend([0; 68]); // a stat
                    }
                }
            }
            send(&mut stream, &reply)?;
        }
    }

    /// A reply after the xid: a header's zxid and error (never one that ends the session:
    /// expired, auth failed) and any body, or bytes too short for a header.
    fn reply() -> impl Strategy<Value = Vec<u8>> {
        let header = (
            any::<i64>(),
            prop_oneof![
                3 => Just(0),
                1 => Just(-101),
                1 => any::<i32>().prop_filter("ends the session", |e| ![-112, -115, -124].contains(e)),
            ],
        );
        prop_oneof![
            6 => (header, body()).prop_map(|((zxid, err), body)| {
                let mut reply = zxid.to_be_bytes().to_vec();
                reply.extend(err.to_be_bytes());
                reply.extend(body);
                reply
            }),
            1 => vec(any::<u8>(), 0..12),
        ]
    }

    /// Calls the `which`th method (modulo their number) and waits for its outcome.
    fn call(client: &Transport, which: u8) -> Option<Result<(), Error>> {
        let opts = CreateMode::EphemeralSequential.with_acls(&OPEN_ACL);
        let outcome: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Error>>>> =
            match which % 10 {
                0 => {
                    let c = client.create("/a/n-", b"x", &opts);
                    Box::pin(async { c.await.map(drop) })
                }
                1 => Box::pin(client.delete("/a", Some(3))),
                2 => {
                    let c = client.get_data("/a");
                    Box::pin(async { c.await.map(drop) })
                }
                3 => {
                    let c = client.check_stat("/a");
                    Box::pin(async { c.await.map(drop) })
                }
                4 => {
                    let c = client.get_children("/a");
                    Box::pin(async { c.await.map(drop) })
                }
                5 => {
                    let c = client.get_and_watch_data("/a");
                    Box::pin(async { c.await.map(drop) })
                }
                6 => {
                    let c = client.get_and_watch_children("/a");
                    Box::pin(async { c.await.map(drop) })
                }
                7 => {
                    let c = client.set_data("/a", b"y", None);
                    Box::pin(async { c.await.map(drop) })
                }
                8 => Box::pin(client.sync("/a")),
                _ => {
                    let c = client.multi(&[
                        TxnRequest::Check {
                            path: "/a".into(),
                            version: 1,
                        },
                        TxnRequest::Create {
                            path: "/a/b".into(),
                            data: Vec::new(),
                            options: opts,
                        },
                    ]);
                    Box::pin(async { c.await.map(drop) })
                }
            };
        block_on(outcome, Some(Instant::now() + Duration::from_secs(5))).ok()
    }

    /// A well-formed request gets its reply within 5 s, after the reconnect if there is one.
    fn alive(client: &Transport) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let exists = client.check_stat("/a");
            match block_on(exists, Some(deadline)) {
                Ok(Ok(_)) => return true,
                Ok(Err(_)) => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => return false,
            }
        }
        false
    }

    /// A reply over the client's limit fails its request alone, with `ReplyTooLarge`, at
    /// once: the reader skips it, the same connection answers the next request, and a watch
    /// asked with it is not left registered.
    #[test]
    fn a_reply_over_the_limit_fails_its_request_alone() {
        let server = Server::start();
        let limit = 64 * 1024;
        let client = Connector::new()
            .session_timeout(Duration::from_secs(4))
            .max_reply_size(limit)
            .connect(&server.hosts(), Instant::now() + Duration::from_secs(5))
            .unwrap();
        for which in [4, 6, 2] {
            // getChildren2 and getData replies: a zxid, OK, and a body of 300,000 bytes.
            let mut huge = 9_i64.to_be_bytes().to_vec();
            huge.extend(0_i32.to_be_bytes());
            huge.extend(vec![0x5a; 300_000]);
            let size = 4 + huge.len();
            server.script.lock().unwrap().push_back(huge);
            let started = Instant::now();
            let outcome = call(&client, which).expect("the call returns");
            assert_eq!(
                outcome,
                Err(Error::ReplyTooLarge { size, limit }),
                "method {which}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
            assert!(
                alive(&client),
                "the session answers nothing after method {which}"
            );
        }
        assert_eq!(
            server.connections.load(Ordering::SeqCst),
            1,
            "the connection was dropped"
        );
        assert_eq!(
            client.state_watcher().peek_state(),
            KeeperState::SyncConnected
        );
        assert_eq!(
            client.shared.watches.lock().armed(),
            (Vec::new(), Vec::new())
        );
    }

    proptest! {
        #![proptest_config(cases(64))]

        #[test]
        fn every_reply_decoder_survives_any_body(calls in vec((any::<u8>(), reply()), 1..4)) {
            let server = Server::start();
            let client = Connector::new()
                .session_timeout(Duration::from_secs(4))
                .connect(&server.hosts(), Instant::now() + Duration::from_secs(5))
                .unwrap();
            for (which, reply) in calls {
                prop_assert!(alive(&client), "the session answers nothing before the call");
                server.script.lock().unwrap().push_back(reply);
                prop_assert!(call(&client, which).is_some(), "method {} never returned", which % 10);
                prop_assert!(alive(&client), "the session answers nothing after method {}", which % 10);
            }
            let state = client.state_watcher().peek_state();
            prop_assert_eq!(state, KeeperState::SyncConnected);
            prop_assert!(server.connections.load(Ordering::SeqCst) >= 1);
        }
    }
}
