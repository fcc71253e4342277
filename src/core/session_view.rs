//! What the core sees of a session and of a node, in its own words: the session's
//! [`Liveness`] and a node's [`NodeStat`]. The session layer (and the simulation) produce
//! them; the core decides on them without knowing the transport.

/// How the state of a session looks to a lock holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    Connected,
    /// No word from the server for a while (the transport gives a connection up after 2/5 of
    /// the session timeout of silence) or connection dropped: the session may live, or may be
    /// expiring.
    Disconnected,
    /// Terminal: expired, closed or refused.
    Ended,
}

/// The subset of a node's `Stat` that zklock uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeStat {
    /// Zxid of the create: ensemble-wide monotonic, hence a fencing token.
    pub(crate) czxid: i64,
    /// Session id owning an ephemeral node, 0 for persistent ones.
    pub(crate) ephemeral_owner: i64,
    /// Creation time, milliseconds since the epoch (server clock).
    pub(crate) ctime: i64,
    /// Data version: bumped by every setData (Curator's revocation request writes it).
    pub(crate) version: i32,
}
