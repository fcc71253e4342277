//! What zklock knows about ZooKeeper nodes, before any session: which paths are valid
//! ([`path`]), Apache Curator's node layout shared by every recipe (the protected prefix,
//! sequence numbers and their order, the revocation marker, node data; [`layout`]), and the
//! fencing token made of a node's stat ([`token`]).
//!
//! Each file is imported by its own path; this one only declares them.

pub(crate) mod layout;
pub(crate) mod path;
pub(crate) mod token;
