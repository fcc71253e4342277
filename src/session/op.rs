//! The shape of a request to the transport as the session's files pass it around: kept apart
//! from `mod.rs` so that the files `mod.rs` itself builds on (the chroot) can use it too.

use std::future::Future;
use std::pin::Pin;

use crate::wire as zk;

/// The transport's answer to a request.
pub(super) type ZkResult<T> = std::result::Result<T, zk::Error>;

/// A request on its way: the transport's future, boxed, so that it can be waited for with a
/// deadline and made again for a retry.
pub(super) type Op<T> = Pin<Box<dyn Future<Output = ZkResult<T>> + Send>>;
