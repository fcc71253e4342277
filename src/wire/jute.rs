//! Jute, ZooKeeper's record encoding, from `zklock-proto`: the one codec the client side, the
//! embedded server and the differential test share. The reader never trusts a length, so a
//! truncated or lying frame is an error, never a panic or a large allocation. What is left here
//! is the client's own error for a frame from the server that does not decode.

use std::fmt;

pub(crate) use zklock_proto::{Reader, Writer};

/// A frame that does not decode: the connection it came on is reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) String);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed frame from the server: {}", self.0)
    }
}

impl From<zklock_proto::DecodeError> for Malformed {
    fn from(e: zklock_proto::DecodeError) -> Malformed {
        Malformed(match e {
            zklock_proto::DecodeError::Malformed(what) => what,
            other => other.to_string(),
        })
    }
}

pub(crate) type Decoded<T> = Result<T, Malformed>;

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
        let mut w = Writer::new();
        w.int(i32::MAX);
        let b = w.into_inner();
        assert!(Reader::new(&b).buffer().is_err());
        assert!(Reader::new(&b).strings().is_err());
        let mut w = Writer::new();
        w.int(-7);
        assert!(Reader::new(&w.into_inner()).buffer().is_err());
        assert!(Reader::new(&[0, 0]).int().is_err());
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xff])
            .buffer()
            .unwrap()
            .is_empty());
        let m: Malformed = Reader::new(&[0, 0]).int().unwrap_err().into();
        assert!(m.0.contains("needed"), "{m}");
    }
}
