//! What a session has learnt of the lock paths it locks for the first time (lately): whether
//! they mostly exist already, which decides how a lock node's create goes out (see
//! `create.rs`).

/// Whether the lock paths this session locks for the first time (lately) mostly exist already
/// (a service's long-lived entities) or mostly do not (new ones): a score of the latest such
/// first uses, from -16 (all existed) to 16 (none did).
#[derive(Default)]
pub(crate) struct PathsSeen {
    score: std::sync::atomic::AtomicI32,
}

/// How a lock node's create goes out.
#[derive(Clone, Copy)]
pub(crate) struct CreatePlan {
    /// The session has not seen its lock path exist lately.
    pub(crate) unknown: bool,
    /// The lock path is created first, pipelined: where first uses are of new paths, that
    /// saves a failed create and a round trip (and costs a NodeExists where not).
    pub(crate) make_path: bool,
    /// The create may go out in a `multi`: a create under a missing lock path fails the whole
    /// `multi`, which is then sent again request by request.
    pub(crate) coalesce: bool,
}

impl PathsSeen {
    const BOUND: i32 = 16;

    /// How a create under a lock path goes out; `known`: the session has seen the path
    /// exist lately.
    pub(crate) fn plan(&self, known: bool) -> CreatePlan {
        let score = self.score.load(std::sync::atomic::Ordering::Relaxed);
        CreatePlan {
            unknown: !known,
            make_path: !known && score > 0,
            coalesce: known || score < 0,
        }
    }

    /// A lock path used for the first time (lately) existed already, or not.
    pub(crate) fn learn(&self, existed: bool) {
        let step = if existed { -1 } else { 1 };
        let _ = self.score.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |s| Some((s + step).clamp(-Self::BOUND, Self::BOUND)),
        );
    }
}
