//! One connection attempt's vocabulary, shared by the session engine (`conn/handshake.rs`) and
//! the SASL exchange it runs during a handshake (`sasl.rs`): why an attempt gave no session, and
//! the blocking read of one frame before the attempt's deadline. Kept apart so that neither of
//! the two has to import the other.

use std::io;
use std::time::Instant;

use super::jute::Malformed;
use super::link::{Frames, Link, Read1};

/// Why one connection attempt gave no session.
#[derive(Debug)]
pub(crate) enum AttemptError {
    /// Connecting or the handshake failed; try another host.
    Io(io::Error),
    Tls(String),
    /// The server says the session has expired.
    Expired,
    AuthFailed,
}

impl From<io::Error> for AttemptError {
    fn from(e: io::Error) -> Self {
        AttemptError::Io(e)
    }
}

impl From<Malformed> for AttemptError {
    fn from(m: Malformed) -> Self {
        AttemptError::Io(io::Error::new(io::ErrorKind::InvalidData, m.0))
    }
}

/// Reads the next frame before `deadline`, or fails.
pub(crate) fn read_frame(
    link: &mut Link,
    frames: &mut Frames,
    deadline: Instant,
) -> io::Result<Vec<u8>> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer from the server in time",
            ));
        }
        link.source.set_timeout(left)?;
        if let Read1::Frame(frame) = frames.next(link.source.as_mut())? {
            return Ok(frame);
        }
    }
}
