//! The threads zklock runs on, below everything that talks to ZooKeeper: its runtime thread
//! and the blocking waits on futures ([`runtime`]), the log relay that keeps a slow logger off
//! that thread ([`relay`]), and cancellation, which wakes a thread parked in any of those waits
//! ([`cancel`]), and the check that a blocking wait is not on an async runtime's worker
//! ([`worker`]).
//!
//! Each file is imported by its own path (`crate::rt::runtime::block_on`); this one only
//! declares them.

pub(crate) mod cancel;
pub(crate) mod park;
pub(crate) mod relay;
pub(crate) mod runtime;
pub(crate) mod timer;
pub(crate) mod worker;
