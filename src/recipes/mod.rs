//! The recipes, each a front end on the waiting core (`core/`): [`mutex`], [`rwlock`],
//! [`semaphore`], [`multi`] and [`election`], their guard ([`guard`]), the calls every guard shares ([`guard_calls`]) and fenced writes
//! ([`fence`]), inspection and breaking of their nodes ([`inspect`]), following an election's leader
//! ([`observe`]), what is measured of each
//! acquisition ([`acquisition`]), the blocking calls they share ([`queue`]), and the
//! [`catalogue`] of their names, kinds and layouts.

pub(crate) mod acquisition;
pub(crate) mod catalogue;
pub(crate) mod election;
pub(crate) mod fence;
pub(crate) mod guard;
pub(crate) mod guard_calls;
pub(crate) mod inspect;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod observe;
pub(crate) mod queue;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
