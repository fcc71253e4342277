//! Jute, ZooKeeper's record encoding: big-endian integers, a one-byte boolean, length-prefixed
//! byte buffers and strings, count-prefixed vectors. The reader never trusts a length: every
//! read is checked against what is left of the frame, so a truncated or lying frame is an
//! error, never a panic or a large allocation.

use std::fmt;

/// A frame or record that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The bytes do not form the record: truncated, a negative or lying length, a string that
    /// is not UTF-8, an op code out of place.
    Malformed(String),
    /// A frame longer than the limit given (ZooKeeper's `jute.maxbuffer`).
    TooLarge {
        /// The length the frame announced.
        len: usize,
        /// The limit it broke.
        max: usize,
    },
    /// A request whose op code this crate does not know; the header decoded, the body was not
    /// read. A server answers it `Unimplemented`.
    UnknownOp(i32),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Malformed(what) => write!(f, "malformed frame: {what}"),
            DecodeError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes over the limit of {max}")
            }
            DecodeError::UnknownOp(op) => write!(f, "unknown op code {op}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The result of decoding.
pub type Decoded<T> = Result<T, DecodeError>;

pub(crate) fn malformed<T>(what: impl Into<String>) -> Decoded<T> {
    Err(DecodeError::Malformed(what.into()))
}

/// Appends jute fields to a buffer, usually a frame (see [`Writer::frame`]).
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty buffer, for a record without a frame's length prefix.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// A frame with room for its 4-byte length prefix, filled in by [`finish`](Self::finish).
    pub fn frame() -> Writer {
        Writer { buf: vec![0; 4] }
    }

    /// An `int`.
    pub fn int(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A `long`.
    pub fn long(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A `boolean`: one byte, 0 or 1.
    pub fn boolean(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    /// A `buffer`: its length, then its bytes.
    pub fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.int(v.len() as i32);
        self.buf.extend_from_slice(v);
        self
    }

    /// A `ustring`: a buffer of UTF-8.
    pub fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(v.as_bytes())
    }

    /// A `vector<ustring>`.
    pub fn strings<S: AsRef<str>>(&mut self, v: &[S]) -> &mut Self {
        self.int(v.len() as i32);
        for s in v {
            self.string(s.as_ref());
        }
        self
    }

    /// Bytes already encoded (another record).
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// A record.
    pub fn record<R: Record>(&mut self, r: &R) -> &mut Self {
        r.encode(self);
        self
    }

    /// How many bytes are written so far (a frame's included its prefix).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is written yet.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes as written, without touching any length prefix.
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }

    /// The frame with its length prefix set (for a writer made by [`Writer::frame`]).
    pub fn finish(mut self) -> Vec<u8> {
        let len = (self.buf.len().saturating_sub(4)) as i32;
        if self.buf.len() >= 4 {
            self.buf[..4].copy_from_slice(&len.to_be_bytes());
        }
        self.buf
    }
}

/// Reads jute fields from one frame's body.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    /// How many bytes are left.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    fn take(&mut self, n: usize, what: &str) -> Decoded<&'a [u8]> {
        if n > self.buf.len() {
            return malformed(format!("{what}: {n} bytes needed, {} left", self.buf.len()));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// An `int`.
    pub fn int(&mut self) -> Decoded<i32> {
        let b = self.take(4, "int")?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A `long`.
    pub fn long(&mut self) -> Decoded<i64> {
        let b = self.take(8, "long")?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// A `boolean` (any non-zero byte is true, as Java's `readBoolean`).
    pub fn boolean(&mut self) -> Decoded<bool> {
        Ok(self.take(1, "boolean")?[0] != 0)
    }

    /// A `buffer`; an absent one (length -1) reads as empty, as ZooKeeper treats it.
    pub fn buffer(&mut self) -> Decoded<&'a [u8]> {
        let len = self.int()?;
        if len < 0 {
            return if len == -1 {
                Ok(&[])
            } else {
                malformed(format!("negative length {len}"))
            };
        }
        self.take(len as usize, "buffer")
    }

    /// A `ustring`.
    pub fn string(&mut self) -> Decoded<String> {
        let bytes = self.buffer()?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| DecodeError::Malformed("string is not UTF-8".into()))
    }

    /// A vector's count (an absent vector, -1, reads as empty). The count is checked against the
    /// bytes left, `min_size` per element, so a lying count cannot make us reserve memory the
    /// frame does not back.
    pub fn count(&mut self, min_size: usize) -> Decoded<usize> {
        let count = self.int()?;
        if count < 0 {
            return if count == -1 {
                Ok(0)
            } else {
                malformed(format!("negative count {count}"))
            };
        }
        let count = count as usize;
        if count > self.buf.len() / min_size.max(1) {
            return malformed(format!(
                "{count} elements announced in {} bytes",
                self.buf.len()
            ));
        }
        Ok(count)
    }

    /// A `vector<ustring>`.
    pub fn strings(&mut self) -> Decoded<Vec<String>> {
        let count = self.count(4)?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(self.string()?);
        }
        Ok(out)
    }

    /// A record.
    pub fn record<R: Record>(&mut self) -> Decoded<R> {
        R::decode(self)
    }

    /// A vector of records, each at least `min_size` bytes.
    pub fn records<R: Record>(&mut self, min_size: usize) -> Decoded<Vec<R>> {
        let count = self.count(min_size)?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(R::decode(self)?);
        }
        Ok(out)
    }
}

/// A jute record: written once, read back the same.
pub trait Record: Sized {
    /// Appends the record's fields.
    fn encode(&self, w: &mut Writer);
    /// Reads the record's fields.
    ///
    /// # Errors
    /// [`DecodeError::Malformed`] if the bytes do not hold the record.
    fn decode(r: &mut Reader<'_>) -> Decoded<Self>;

    /// The record alone, as bytes (no length prefix).
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.into_inner()
    }

    /// The record from exactly these bytes.
    ///
    /// # Errors
    /// [`DecodeError::Malformed`] if the bytes do not hold the record or hold more.
    fn from_bytes(bytes: &[u8]) -> Decoded<Self> {
        let mut r = Reader::new(bytes);
        let v = Self::decode(&mut r)?;
        if r.remaining() != 0 {
            return malformed(format!("{} bytes after the record", r.remaining()));
        }
        Ok(v)
    }
}

/// Splits the first frame off `buf`: `Ok(Some((body, consumed)))` once a whole frame is there,
/// `Ok(None)` while more bytes are needed.
///
/// # Errors
/// [`DecodeError::TooLarge`] for a frame announcing more than `max` bytes (ZooKeeper closes the
/// connection), [`DecodeError::Malformed`] for a negative length.
pub fn split_frame(buf: &[u8], max: usize) -> Decoded<Option<(&[u8], usize)>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 {
        return malformed(format!("negative frame length {len}"));
    }
    let len = len as usize;
    if len > max {
        return Err(DecodeError::TooLarge { len, max });
    }
    if buf.len() - 4 < len {
        return Ok(None);
    }
    Ok(Some((&buf[4..4 + len], 4 + len)))
}
