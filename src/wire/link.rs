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

/// Reads whole frames off a [`Source`], never buffering more than one frame of at most
/// `max` bytes.
pub(crate) struct Frames {
    buf: Vec<u8>,
    filled: usize,
    max: usize,
}

/// What one read of [`Frames::next`] found.
pub(crate) enum Read1 {
    Frame(Vec<u8>),
    /// No frame complete yet: the read timed out, or what it read completes none.
    Idle,
}

impl Frames {
    pub(crate) fn new(max: usize) -> Frames {
        Frames {
            buf: vec![0; 64 * 1024],
            filled: 0,
            max,
        }
    }

    /// The next frame's body; `Idle` if the read timed out, or if the one read it made
    /// completed no frame; an error if the stream ended or a length is out of bounds.
    ///
    /// At most one read per call, whether it completes a frame or not: a server that trickles
    /// a byte per read timeout would otherwise hold the caller here for as long as it likes,
    /// away from its deadline (a handshake) and its liveness checks (a session's I/O thread).
    pub(crate) fn next(&mut self, source: &mut dyn Source) -> io::Result<Read1> {
        if let Some(frame) = self.take_frame()? {
            return Ok(Read1::Frame(frame));
        }
        if self.filled == self.buf.len() {
            let grown = (self.buf.len() * 2).min(self.max + 4);
            self.grow_to(grown);
        }
        loop {
            match source.recv(&mut self.buf[self.filled..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ))
                }
                Ok(n) => {
                    self.filled += n;
                    return Ok(match self.take_frame()? {
                        Some(frame) => Read1::Frame(frame),
                        None => Read1::Idle,
                    });
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

    fn take_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        if self.filled < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len < 0 || len as usize > self.max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("frame length {len} out of bounds (max {})", self.max),
            ));
        }
        let end = 4 + len as usize;
        if self.filled < end {
            if self.buf.len() < end {
                self.grow_to(end);
            }
            return Ok(None);
        }
        let frame = self.buf[4..end].to_vec();
        self.buf.copy_within(end..self.filled, 0);
        self.filled -= end;
        if self.buf.len() > 64 * 1024 && self.filled <= 64 * 1024 {
            // A large frame passed: do not keep its buffer for the life of the connection.
            self.buf.truncate(64 * 1024);
            self.buf.shrink_to_fit();
        }
        Ok(Some(frame))
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
                }
            }
            assert_eq!(got, vec![5, 100_000, 0], "chunk {chunk}");
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
