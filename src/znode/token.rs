//! [`FencingToken`]: the fencing token that keeps increasing when an ensemble is re-created.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// A fencing token: pass it with every write to a store outside ZooKeeper, together with the
/// lock path it was taken on, and let the store refuse a write whose token is lower than the
/// highest it has seen *for that lock path* ([`LockGuard::fencing`](crate::LockGuard::fencing)).
///
/// **Tokens compare only within one lock path.** They increase from one holder of a lock to
/// the next; tokens of different lock paths are unrelated, and may even be equal: lock nodes
/// created in one `multi` (zklock coalesces the creates of concurrent callers on one
/// session, each on a different lock path) share its zxid, and lock paths created in the same
/// millisecond share a generation. A store that keeps one highest token for all its locks
/// (per-entity locks such as `/locks/orders/<id>`, say) refuses valid writes as soon as one
/// entity's lock path is older, or its node older, than another's. Keep the highest token per
/// lock path:
///
/// ```
/// use std::collections::HashMap;
/// use zklock::FencingToken;
///
/// /// A store outside ZooKeeper that refuses stale holders: one highest token per lock path.
/// #[derive(Default)]
/// struct Store {
///     highest: HashMap<String, FencingToken>,
///     rows: HashMap<String, Vec<u8>>,
/// }
///
/// impl Store {
///     fn write(&mut self, lock_path: &str, token: FencingToken, row: &str, value: &[u8]) -> bool {
///         let highest = self.highest.entry(lock_path.to_owned()).or_insert(token);
///         if token < *highest {
///             return false; // a stale holder of this lock: refused
///         }
///         *highest = token;
///         self.rows.insert(row.to_owned(), value.to_vec());
///         true
///     }
/// }
///
/// // Tokens as `guard.fencing()` returns them for two per-entity locks (order 2's lock path
/// // is older, so its tokens are lower than order 1's: it does not matter).
/// let order_1 = FencingToken::from_u128((1_700_000_002_000 << 80) | (90 << 16));
/// let order_2 = FencingToken::from_u128((1_700_000_001_000 << 80) | (95 << 16));
/// let mut store = Store::default();
/// assert!(store.write("/locks/orders/1", order_1, "orders/1", b"paid"));
/// assert!(store.write("/locks/orders/2", order_2, "orders/2", b"paid")); // another lock
/// // A stale holder of order 1 (an earlier node of the same lock path) is refused.
/// let stale = FencingToken::from_u128((1_700_000_002_000 << 80) | (80 << 16));
/// assert!(!store.write("/locks/orders/1", stale, "orders/1", b"refunded"));
/// ```
///
/// Tokens are ordered first by the lock's *generation*, the creation time of the lock path's
/// node (server clock, milliseconds since the Unix epoch), then by the creation zxid of the
/// holder's lock node, then by the holder's [`local`](Self::local) number (how many times the
/// node was passed on inside its process before this holder, with
/// [local handoff](crate::DistributedMutex::local_handoff); 0 otherwise):
/// - while the lock path's node exists, every holder's node is created in it, and zxids grow
///   across the whole ensemble, so each holder's token is higher than every earlier holder's;
/// - the lock path's node is created again only when the ensemble's data was re-created
///   (data dirs wiped, a new ensemble behind the same names: its zxids begin again) or after
///   the server removed the empty container; the new node's creation time is later than the
///   old one's, so the new generation's tokens are higher than every old one, whatever their
///   zxids.
///
/// The second rule rests on the servers' clocks: it holds as long as the clock of the server
/// that creates the lock path again has not been set back by more than the time since the
/// previous lock path node was created (an idle container is removed at the earliest a
/// minute, by default, after its last node went). Within one generation no clock is
/// involved.
///
/// A store can keep the token in any of three forms that sort the same way:
/// [`to_u128`](Self::to_u128), the [`Display`](fmt::Display) form (32 lower-case hex digits,
/// which compare as strings in token order; parsed back by [`FromStr`]), or the three numbers
/// [`generation`](Self::generation), [`zxid`](Self::zxid) and [`local`](Self::local) compared
/// in that order.
///
/// With [local handoff](crate::DistributedMutex::local_handoff), the local holders of one
/// node share its generation and zxid; only [`local`](Self::local) tells a holder from the
/// one before it. A store must then compare all three numbers (or one of the other two
/// forms), never the zxid or the `(generation, zxid)` pair alone: by those, a late write of
/// one local holder would pass after the next holder's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FencingToken {
    // Field order is the comparison order (derived `Ord`).
    generation: i64,
    zxid: i64,
    local: u16,
}

/// The generation's bits in [`FencingToken::to_u128`]: milliseconds up to the year 10889.
const GENERATION_BITS: u32 = 48;

impl FencingToken {
    pub(crate) fn new(generation: i64, zxid: i64) -> FencingToken {
        FencingToken::local_to(generation, zxid, 0)
    }

    /// The token of the `local`-th holder a lock node was passed to inside its process.
    pub(crate) fn local_to(generation: i64, zxid: i64, local: u16) -> FencingToken {
        // (A generation past the 48 bits `to_u128` keeps would be a server clock 8,000 years
        // ahead: clamped, it still sorts after every earlier one.)
        let generation = generation.clamp(0, (1 << GENERATION_BITS) - 1);
        FencingToken {
            generation,
            zxid,
            local,
        }
    }

    /// The generation: the lock path node's creation time (`ctime`), in milliseconds since the
    /// Unix epoch on the clock of the server that created it.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// The holder's lock node's creation zxid (`czxid`); what 0.1's `LockGuard::fencing_token()`
    /// returned, and the [`zxid`](crate::inspect::Contender::zxid) inspection shows.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// How many times the lock node was passed on inside its process before this holder took
    /// it ([local handoff](crate::DistributedMutex::local_handoff)): 0 for the holder that
    /// took the node from the server, then 1, 2, ... for the callers of the same client it
    /// was handed to without the server. Always 0 without local handoff.
    pub fn local(&self) -> u16 {
        self.local
    }

    /// One number in token order: the generation in the high 48 bits, the zxid in the next
    /// 64, the [`local`](Self::local) number in the low 16 (all are never negative).
    pub fn to_u128(&self) -> u128 {
        (u128::from(self.generation as u64) << 80)
            | (u128::from(self.zxid as u64) << 16)
            | u128::from(self.local)
    }

    /// The token [`to_u128`](Self::to_u128) made `value` from.
    pub fn from_u128(value: u128) -> FencingToken {
        FencingToken {
            generation: (value >> 80) as u64 as i64,
            zxid: (value >> 16) as u64 as i64,
            local: value as u16,
        }
    }
}

/// 32 lower-case hex digits (of [`to_u128`](FencingToken::to_u128)), generation first:
/// strings that compare in token order.
impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.to_u128())
    }
}

/// Parses the [`Display`](fmt::Display) form (32 hex digits, either case).
impl FromStr for FencingToken {
    type Err = Error;

    fn from_str(text: &str) -> Result<FencingToken, Error> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::InvalidArgument(
                "a fencing token is 32 hexadecimal digits",
            ));
        }
        u128::from_str_radix(text, 16)
            .map(FencingToken::from_u128)
            .map_err(|_| Error::InvalidArgument("a fencing token is 32 hexadecimal digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_generation_outranks_any_zxid_of_an_earlier_one() {
        let before_the_wipe = FencingToken::new(1_700_000_000_000, 0x1b3);
        let after_the_wipe = FencingToken::new(1_700_000_360_000, 0x5);
        assert!(after_the_wipe > before_the_wipe);
        assert!(after_the_wipe.to_u128() > before_the_wipe.to_u128());
        assert!(after_the_wipe.to_string() > before_the_wipe.to_string());
        // Within a generation, the zxid decides.
        let next = FencingToken::new(1_700_000_360_000, 0x6);
        assert!(next > after_the_wipe);
        assert!(next.to_u128() > after_the_wipe.to_u128());
        assert!(next.to_string() > after_the_wipe.to_string());
    }

    #[test]
    fn a_local_holder_outranks_the_one_before_it_and_a_later_node_outranks_both() {
        let node = FencingToken::new(1_763_950_000_123, 0x1b3);
        let second = FencingToken::local_to(1_763_950_000_123, 0x1b3, 1);
        let last = FencingToken::local_to(1_763_950_000_123, 0x1b3, u16::MAX);
        let next_node = FencingToken::new(1_763_950_000_123, 0x1b4);
        let forms = [node, second, last, next_node];
        for pair in forms.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].to_u128() < pair[1].to_u128());
            assert!(pair[0].to_string() < pair[1].to_string());
        }
        assert_eq!(second.local(), 1);
        assert_eq!(FencingToken::from_u128(last.to_u128()), last);
    }

    #[test]
    fn every_form_round_trips() {
        let token = FencingToken::new(1_763_950_000_123, 0x0000_0003_0000_01b3);
        assert_eq!(FencingToken::from_u128(token.to_u128()), token);
        let text = token.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse::<FencingToken>().unwrap(), token);
        assert_eq!(text.to_uppercase().parse::<FencingToken>().unwrap(), token);
        assert!("12".parse::<FencingToken>().is_err());
        assert!("g".repeat(32).parse::<FencingToken>().is_err());
        assert!(format!("+{}", "0".repeat(31))
            .parse::<FencingToken>()
            .is_err());
    }
}
