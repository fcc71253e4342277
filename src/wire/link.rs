//! One TCP connection to a server, split into the half callers write requests to and the half
//! the session's I/O thread reads replies from; TLS (feature `tls`) wraps both.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// Where requests are written; callers write under the session's I/O lock, so one frame is
/// never interleaved with another.
pub(crate) trait Sink: Send {
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;
}

/// Where replies are read from, by the I/O thread only.
pub(crate) trait Source: Send {
    /// Reads what has arrived; `Ok(0)` at end of stream; a `WouldBlock`/`TimedOut` error when
    /// nothing came within the read timeout.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Sets how long [`recv`](Self::recv) waits.
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()>;
}

/// An open connection.
pub(crate) struct Link {
    pub(crate) sink: Box<dyn Sink>,
    pub(crate) source: Box<dyn Source>,
    /// Shuts the socket down from any thread, which ends a blocked read or write.
    pub(crate) closer: Closer,
}

#[derive(Debug, Clone)]
pub(crate) struct Closer(std::sync::Arc<TcpStream>);

impl Closer {
    pub(crate) fn new(stream: TcpStream) -> Closer {
        Closer(std::sync::Arc::new(stream))
    }

    pub(crate) fn clone_of(other: &Closer) -> Closer {
        other.clone()
    }

    pub(crate) fn close(&self) {
        let _ = self.0.shutdown(Shutdown::Both);
    }

    /// The server's address, for messages.
    pub(crate) fn peer(&self) -> String {
        self.0
            .peer_addr()
            .map_or_else(|_| "?".to_owned(), |a| a.to_string())
    }
}

/// How long a write may block (the server stopped reading): then the connection is given up.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens a TCP connection to `addr` within `timeout`, with Nagle off: requests are small and
/// pipelined, and with Nagle on the second of two back-to-back requests would wait for the
/// first one's reply.
pub(crate) fn tcp(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(SEND_TIMEOUT))?;
    Ok(stream)
}

struct PlainSink(TcpStream);

impl Sink for PlainSink {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.0.write_all(frame)
    }
}

struct PlainSource(TcpStream);

impl Source for PlainSource {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.0
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
    }
}

/// A plain TCP link over `stream`.
pub(crate) fn plain(stream: TcpStream) -> io::Result<Link> {
    Ok(Link {
        sink: Box::new(PlainSink(stream.try_clone()?)),
        source: Box::new(PlainSource(stream.try_clone()?)),
        closer: Closer::new(stream),
    })
}

/// Reads whole frames off a [`Source`], never holding more than one frame of at most `max`
/// bytes, and never much more memory than the bytes of it that have arrived: a length prefix
/// alone allocates nothing.
///
/// A frame over `max` ends the stream with an error, unless oversized frames are
/// [skipped](Self::skip_oversized): then its first bytes are reported and the rest is read and
/// thrown away, so that one reply too large for the client fails only its own request.
pub(crate) struct Frames {
    buf: Vec<u8>,
    filled: usize,
    max: usize,
    skip_oversized: bool,
    /// Bytes of an oversized frame still to be read and thrown away.
    skipping: usize,
    /// Bytes read off the source so far: traffic, even while no frame completes.
    received: u64,
}

/// What one read of [`Frames::next`] found.
pub(crate) enum Read1 {
    Frame(Vec<u8>),
    /// A frame over the limit, with [skipping](Frames::skip_oversized) on: its first
    /// [`OVERSIZED_HEAD`] bytes (a reply's header) and its length. The following calls read
    /// the rest of it and throw it away.
    Oversized {
        head: Vec<u8>,
        len: usize,
    },
    /// No frame complete yet: the read timed out, or what it read completes none.
    Idle,
}

/// How much of an oversized frame is kept: a reply header (xid, zxid, error).
pub(crate) const OVERSIZED_HEAD: usize = 16;

/// The buffer a connection starts with, and returns to after a large frame.
const INITIAL: usize = 64 * 1024;

impl Frames {
    pub(crate) fn new(max: usize) -> Frames {
        Frames {
            buf: vec![0; INITIAL],
            filled: 0,
            max,
            skip_oversized: false,
            skipping: 0,
            received: 0,
        }
    }

    /// From now on, frames of up to `max` bytes are read whole, and a larger one is reported
    /// as [`Read1::Oversized`] and skipped, instead of ending the stream.
    pub(crate) fn skip_oversized(&mut self, max: usize) {
        self.max = max;
        self.skip_oversized = true;
    }

    /// The largest frame read whole.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Bytes read off the source so far.
    pub(crate) fn received(&self) -> u64 {
        self.received
    }

    /// The next frame's body; `Idle` if the read timed out, or if the one read it made
    /// completed no frame; an error if the stream ended or a length is out of bounds.
    ///
    /// At most one read per call, whether it completes a frame or not: a server that trickles
    /// a byte per read timeout would otherwise hold the caller here for as long as it likes,
    /// away from its deadline (a handshake) and its liveness checks (a session's I/O thread).
    pub(crate) fn next(&mut self, source: &mut dyn Source) -> io::Result<Read1> {
        if self.skipping == 0 {
            if let Some(read) = self.take_frame()? {
                return Ok(read);
            }
        }
        // While skipping, a read takes no byte past the oversized frame's end, into the
        // buffer's start: what it read is thrown away at once.
        let room = if self.skipping > 0 {
            0..self.skipping.min(self.buf.len())
        } else {
            if self.filled == self.buf.len() {
                // Grows with what has arrived (doubling), never past the frame's end: a
                // length prefix alone does not make us allocate what it announces.
                let end = self.frame_end().unwrap_or(self.max + 4);
                let grown = (self.buf.len() * 2).min(end).max(self.filled + 1);
                self.grow_to(grown);
            }
            self.filled..self.buf.len()
        };
        loop {
            match source.recv(&mut self.buf[room.clone()]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ))
                }
                Ok(n) => {
                    self.received += n as u64;
                    if self.skipping > 0 {
                        self.skipping -= n;
                        return Ok(Read1::Idle);
                    }
                    self.filled += n;
                    return Ok(self.take_frame()?.unwrap_or(Read1::Idle));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Read1::Idle)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether the next call can return a frame (or an oversized one's start) without reading:
    /// the reader knows whether more replies are at hand.
    pub(crate) fn has_frame(&self) -> bool {
        if self.skipping > 0 || self.filled < 4 {
            return false;
        }
        let len = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        match usize::try_from(len) {
            // Over the limit: its head is what the next call returns (or an error).
            Ok(len) if len > self.max => {
                !self.skip_oversized || self.filled >= 4 + OVERSIZED_HEAD.min(len)
            }
            Ok(len) => self.filled >= 4 + len,
            Err(_) => true, // The next call fails on it.
        }
    }

    /// Where the frame at the buffer's start ends (length prefix included), once its length
    /// is known and within bounds.
    fn frame_end(&self) -> Option<usize> {
        if self.filled < 4 {
            return None;
        }
        let len = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        usize::try_from(len)
            .ok()
            .filter(|&len| len <= self.max)
            .map(|len| 4 + len)
    }

    /// Lengthens the buffer to `len` bytes, allocating no more than that: `Vec::resize`
    /// alone may double the capacity, and a buffer that once held half a maximal frame would
    /// then take twice the maximum for the next one.
    fn grow_to(&mut self, len: usize) {
        self.buf.reserve_exact(len.saturating_sub(self.buf.len()));
        self.buf.resize(len, 0);
    }

    /// Bytes allocated for the buffer (tests: it stays within one maximal frame).
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.buf.capacity()
    }

    fn take_frame(&mut self) -> io::Result<Option<Read1>> {
        if self.filled < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let Ok(len) = usize::try_from(len) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("negative frame length {len}"),
            ));
        };
        if len > self.max {
            return self.take_oversized(len);
        }
        let end = 4 + len;
        if self.filled < end {
            return Ok(None);
        }
        if end > INITIAL {
            // A large frame fills the buffer, which never grows past a frame's end: hand the
            // buffer itself out rather than a copy, which would hold the frame twice.
            debug_assert_eq!(self.filled, end);
            let mut frame = std::mem::replace(&mut self.buf, vec![0; INITIAL]);
            frame.truncate(end);
            frame.drain(..4);
            self.filled = 0;
            return Ok(Some(Read1::Frame(frame)));
        }
        let frame = self.buf[4..end].to_vec();
        self.buf.copy_within(end..self.filled, 0);
        self.filled -= end;
        Ok(Some(Read1::Frame(frame)))
    }

    /// A frame of `len` bytes, over the limit: an error, or, when skipping, its head (once
    /// that has arrived) and the skipping of the rest.
    fn take_oversized(&mut self, len: usize) -> io::Result<Option<Read1>> {
        if !self.skip_oversized {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("frame length {len} out of bounds (max {})", self.max),
            ));
        }
        let head_end = 4 + OVERSIZED_HEAD.min(len);
        if self.filled < head_end {
            return Ok(None);
        }
        let head = self.buf[4..head_end].to_vec();
        // The buffer is never longer than a frame within bounds, so all it holds is this
        // frame's: throw it away, and the rest as it arrives.
        let total = 4 + len;
        let consumed = self.filled.min(total);
        self.buf.copy_within(consumed..self.filled, 0);
        self.filled -= consumed;
        self.skipping = total - consumed;
        if self.buf.len() > INITIAL {
            self.buf.truncate(INITIAL);
            self.buf.shrink_to_fit();
        }
        Ok(Some(Read1::Oversized { head, len }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that hands out `data` in chunks of `chunk` bytes, then times out.
    struct Chunks {
        data: Vec<u8>,
        chunk: usize,
    }

    impl Source for Chunks {
        fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.data.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = self.chunk.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data.drain(..n);
            Ok(n)
        }
        fn set_timeout(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn frames_split_across_reads_and_several_in_one_read() {
        let mut data = framed(b"hello");
        data.extend(framed(&[7; 100_000]));
        data.extend(framed(b""));
        for chunk in [1, 3, 4096, 1 << 20] {
            let mut source = Chunks {
                data: data.clone(),
                chunk,
            };
            let mut frames = Frames::new(1 << 20);
            let mut got = Vec::new();
            // A call that reads part of a frame is idle; the source is done when it is drained.
            loop {
                match frames.next(&mut source).unwrap() {
                    Read1::Frame(f) => got.push(f.len()),
                    Read1::Idle if source.data.is_empty() => break,
                    Read1::Idle => {}
                    Read1::Oversized { len, .. } => panic!("a frame of {len} skipped"),
                }
            }
            assert_eq!(got, vec![5, 100_000, 0], "chunk {chunk}");
        }
    }

    /// `has_frame` is true exactly when `next` returns something other than `Idle` without
    /// reading: a whole frame, an oversized frame's head (when skipping), or an error.
    #[test]
    fn has_frame_says_whether_next_can_return_without_reading() {
        let mut data = framed(b"one");
        data.extend(framed(&[7; 300]));
        data.extend(framed(b"two"));
        for chunk in 1..40 {
            let mut source = Chunks {
                data: data.clone(),
                chunk,
            };
            let mut frames = Frames::new(200);
            frames.skip_oversized(200);
            let mut empty = Chunks {
                data: Vec::new(),
                chunk,
            };
            let mut got = Vec::new();
            let take = |read: Read1, got: &mut Vec<usize>| match read {
                Read1::Frame(f) => got.push(f.len()),
                Read1::Oversized { len, .. } => got.push(len),
                Read1::Idle => {}
            };
            while got.len() < 3 {
                // Without reading (the source behind it is empty), something comes iff it is
                // at hand.
                let at_hand = frames.has_frame();
                let read = frames.next(&mut empty).unwrap();
                assert_eq!(at_hand, !matches!(read, Read1::Idle), "chunk {chunk}");
                take(read, &mut got);
                if !at_hand {
                    assert!(!source.data.is_empty(), "chunk {chunk}: {got:?}");
                    let read = frames.next(&mut source).unwrap();
                    take(read, &mut got);
                }
            }
            assert_eq!(got, [3, 300, 3], "chunk {chunk}");
        }
    }

    #[test]
    fn an_oversized_or_negative_length_is_an_error() {
        for len in [i32::MAX, -1, (1 << 20) + 1] {
            let mut source = Chunks {
                data: len.to_be_bytes().to_vec(),
                chunk: 4,
            };
            assert!(Frames::new(1 << 20).next(&mut source).is_err(), "{len}");
        }
    }
}
