//! Jute, ZooKeeper's record encoding: big-endian integers, length-prefixed byte buffers and
//! strings, length-prefixed vectors. The reader never trusts a length: every read is checked
//! against what is left of the frame, so a truncated or lying frame is an error, never a panic
//! or a large allocation.

use std::fmt;

/// A frame that does not decode: the connection it came on is reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) String);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed frame from the server: {}", self.0)
    }
}

pub(crate) type Decoded<T> = Result<T, Malformed>;

/// Appends jute fields to a frame.
#[derive(Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// A frame with room for its 4-byte length prefix, filled in by [`finish`](Self::finish).
    pub(crate) fn frame() -> Writer {
        Writer { buf: vec![0; 4] }
    }

    pub(crate) fn int(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(crate) fn long(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(crate) fn boolean(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    /// A byte buffer; jute writes an absent buffer as length -1, an empty one as 0.
    pub(crate) fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.int(v.len() as i32);
        self.buf.extend_from_slice(v);
        self
    }

    /// Bytes already encoded (another request's body).
    pub(crate) fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    pub(crate) fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(v.as_bytes())
    }

    pub(crate) fn strings<S: AsRef<str>>(&mut self, v: &[S]) -> &mut Self {
        self.int(v.len() as i32);
        for s in v {
            self.string(s.as_ref());
        }
        self
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// The frame with its length prefix set.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let len = (self.buf.len() - 4) as i32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }
}

/// Reads jute fields from one frame's body.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The bytes not read yet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.buf
    }

    fn take(&mut self, n: usize, what: &str) -> Decoded<&'a [u8]> {
        if n > self.buf.len() {
            return Err(Malformed(format!(
                "{what}: {n} bytes needed, {} left",
                self.buf.len()
            )));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(crate) fn int(&mut self) -> Decoded<i32> {
        let b = self.take(4, "int")?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn long(&mut self) -> Decoded<i64> {
        let b = self.take(8, "long")?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub(crate) fn boolean(&mut self) -> Decoded<bool> {
        Ok(self.take(1, "bool")?[0] != 0)
    }

    /// A buffer; an absent one (length -1) reads as empty.
    pub(crate) fn buffer(&mut self) -> Decoded<&'a [u8]> {
        let len = self.int()?;
        if len < 0 {
            return if len == -1 {
                Ok(&[])
            } else {
                Err(Malformed(format!("negative length {len}")))
            };
        }
        self.take(len as usize, "buffer")
    }

    pub(crate) fn string(&mut self) -> Decoded<String> {
        let bytes = self.buffer()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| Malformed("string is not UTF-8".into()))
    }

    /// A vector of strings. Its count is checked against the bytes left (each element takes at
    /// least 4), so a lying count cannot make us reserve memory the frame does not back.
    pub(crate) fn strings(&mut self) -> Decoded<Vec<String>> {
        let count = self.int()?;
        if count < 0 {
            return if count == -1 {
                Ok(Vec::new())
            } else {
                Err(Malformed(format!("negative count {count}")))
            };
        }
        let count = count as usize;
        if count > self.buf.len() / 4 {
            return Err(Malformed(format!(
                "{count} strings announced in {} bytes",
                self.buf.len()
            )));
        }
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(self.string()?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length_prefix() {
        let mut w = Writer::frame();
        w.int(-2)
            .long(1 << 40)
            .boolean(true)
            .string("/a/b")
            .buffer(&[]);
        w.strings(&["x", "yz"]);
        let frame = w.finish();
        let len = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(len, frame.len() - 4);
        let mut r = Reader::new(&frame[4..]);
        assert_eq!(r.int().unwrap(), -2);
        assert_eq!(r.long().unwrap(), 1 << 40);
        assert!(r.boolean().unwrap());
        assert_eq!(r.string().unwrap(), "/a/b");
        assert_eq!(r.buffer().unwrap(), b"");
        assert_eq!(r.strings().unwrap(), vec!["x".to_owned(), "yz".to_owned()]);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn lying_lengths_are_errors_not_allocations() {
        let mut w = Writer::default();
        w.int(i32::MAX);
        assert!(Reader::new(&w.buf).buffer().is_err());
        assert!(Reader::new(&w.buf).strings().is_err());
        let mut w = Writer::default();
        w.int(-7);
        assert!(Reader::new(&w.buf).buffer().is_err());
        assert!(Reader::new(&[0, 0]).int().is_err());
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xff])
            .buffer()
            .unwrap()
            .is_empty());
    }
}
