//! The pause before a request that got no answer is sent again.

use std::time::Duration;

use crate::rt::runtime::sleep;
use crate::wire as zk;

/// Pause before retrying a request the server did not answer while the connection stayed up.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Before retrying a request that failed without an answer: pauses briefly if still connected
/// (throttled), else waits until connected. `false` if the session ended.
pub(crate) async fn retry_pause_async(state: &mut zk::StateWatcher) -> bool {
    if matches!(state.peek_state(), zk::KeeperState::SyncConnected) {
        sleep(RETRY_PAUSE).await;
    }
    loop {
        match state.state() {
            s if s.is_terminated() => return false,
            zk::KeeperState::SyncConnected => return true,
            _ => {
                state.changed().await;
            }
        }
    }
}
