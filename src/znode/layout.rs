//! Apache Curator's node layout, which zklock shares so that both interoperate on one lock:
//! node names (the protected prefix, a recipe's name, the sequence number), their order, the
//! revocation marker, and the data zklock stores in its nodes. Which names each recipe uses is
//! the catalogue's to say (`recipes/catalogue.rs`).

use crate::error::{Error, Result};
use crate::random::Uuid;

/// Curator's protected-name prefix: `_c_<uuid>-`. The uuid makes a node findable after a
/// `create` whose reply was lost.
pub(crate) fn protected_prefix(id: &Uuid) -> String {
    format!("_c_{}-", id.hyphenated())
}

/// The sequence number of a lock node: the digits after the last `lock_name`. `None` for
/// children that are not lock nodes of this kind.
pub(crate) fn sequence_of(name: &str, lock_name: &str) -> Option<i64> {
    let start = name.rfind(lock_name)? + lock_name.len();
    parse_sequence(&name[start..])
}

/// ZooKeeper appends a signed 32-bit counter formatted "%010d": ten digits, or after the
/// counter wrapped a minus sign and at least nine. Anything else is not ours to order.
fn parse_sequence(digits: &str) -> Option<i64> {
    let (unsigned, min_len) = match digits.strip_prefix('-') {
        Some(unsigned) => (unsigned, 9),
        None => (digits, 10),
    };
    if unsigned.len() < min_len || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The length of the suffix ZooKeeper gives a sequential node (see [`parse_sequence`]).
const SEQUENCE_LEN: usize = 10;

/// Which of `lock_names` a child carries and its sequence: the text after the last
/// occurrence of any of the names, as Curator's `fixForSorting` does.
pub(crate) fn name_and_sequence(name: &str, lock_names: &[&str]) -> Option<(usize, i64)> {
    // Every waiter reads the whole queue at a handoff, so the usual shape is checked first,
    // on bytes and without searching: a lock name, then ZooKeeper's ten-character suffix, and
    // no lock name starting after that one.
    if let Some(found) = usual_shape(name.as_bytes(), lock_names) {
        return Some(found);
    }
    let (name_index, lock_name) = lock_names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| name.rfind(n).map(|at| (at, i, *n)))
        .max_by_key(|(at, _, _)| *at)
        .map(|(_, i, n)| (i, n))?;
    sequence_of(name, lock_name).map(|sequence| (name_index, sequence))
}

/// [`name_and_sequence`] for names of the usual shape; `None` for any other (which the general
/// rule then reads).
fn usual_shape(name: &[u8], lock_names: &[&str]) -> Option<(usize, i64)> {
    let at = name.len().checked_sub(SEQUENCE_LEN)?;
    let (head, tail) = name.split_at(at);
    let (negative, digits) = match tail.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, tail),
    };
    let mut value = 0i64;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i64::from(d - b'0');
    }
    let index = lock_names.iter().position(|n| {
        let n = n.as_bytes();
        head.last() == n.last() && head.ends_with(n)
    })?;
    // No lock name may start after the one found (a lock name is never all digits, so only
    // the few other bytes need a look).
    let later = &name[at - lock_names[index].len() + 1..];
    for (i, b) in later.iter().enumerate() {
        if !b.is_ascii_digit()
            && lock_names.iter().any(|n| {
                let n = n.as_bytes();
                n.first() == Some(b) && later[i..].starts_with(n)
            })
        {
            return None;
        }
    }
    Some((index, if negative { -value } else { value }))
}

/// One lock node seen in a listing of the lock path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockNode {
    pub(crate) sequence: i64,
    pub(crate) name: String,
    /// Which of the recipe's node names it carries: an index into its `Kind::names` (e.g. 0 for
    /// `__READ__`, 1 for `__WRIT__`).
    pub(crate) name_index: usize,
}

impl LockNode {
    /// The child `name` as a lock node carrying one of `lock_names`, if it is one.
    pub(crate) fn parse(name: String, lock_names: &[&str]) -> Option<LockNode> {
        let (name_index, sequence) = name_and_sequence(&name, lock_names)?;
        Some(LockNode {
            sequence,
            name,
            name_index,
        })
    }

    /// The counter's value as a point on the 2^32 circle (truncation is the point).
    fn circle(&self) -> u32 {
        self.sequence as u32
    }

    /// Whether a node `name` with `sequence` comes before `other` in the queue (see
    /// [`nodes_ahead`]).
    fn precedes(sequence: i64, name: &str, other: &LockNode) -> bool {
        let behind = other.circle().wrapping_sub(sequence as u32);
        match behind {
            0 => name < other.name.as_str(),
            d => d < 1 << 31,
        }
    }
}

/// The lock nodes among `children` carrying one of `lock_names`, in lock order: by sequence
/// only, whatever the prefix, so nodes of other libraries using the same naming (Curator's)
/// interleave correctly. A name's sequence is the text after the last occurrence of any of
/// the names, as Curator's `fixForSorting` does.
///
/// The parent's counter is a signed 32-bit integer that every create and every delete
/// advances, so a busy lock path that is never emptied reaches 2^31 (after about 1.07e9
/// acquisitions). A server that wrapped it cleanly would follow `2147483647` with
/// `-2147483648`, and later `-1` with `0`, and sequences are compared as serial numbers
/// (RFC 1982) so that such a queue still sorts: the live queue always spans far less than
/// 2^31 values, so it is ordered from the node that follows the largest gap on the 2^32
/// circle. ZooKeeper 3.8 does not wrap cleanly (it numbers every later node `2147483647`, and
/// some negative), so zklock refuses to queue a node of its own numbered `2147483647` or
/// below 0 (`Error::SequenceExhausted`). (Curator compares the suffixes as text, which puts
/// negative sequences first. Recreating an idle lock path resets its counter.)
pub(crate) fn sorted_lock_nodes(children: Vec<String>, lock_names: &[&str]) -> Vec<LockNode> {
    let mut nodes: Vec<LockNode> = children
        .into_iter()
        .filter_map(|name| LockNode::parse(name, lock_names))
        .collect();
    nodes.sort_unstable_by(|a, b| {
        a.circle()
            .cmp(&b.circle())
            .then_with(|| a.name.cmp(&b.name))
    });
    // Start after the largest gap between neighbours on the circle: the gap that wraps.
    if let Some(last) = nodes.last() {
        let wrap_gap = nodes[0].circle().wrapping_sub(last.circle());
        let (start, _) = nodes
            .windows(2)
            .enumerate()
            .map(|(i, pair)| (i + 1, pair[1].circle().wrapping_sub(pair[0].circle())))
            .fold(
                (0, wrap_gap),
                |best, gap| if gap.1 > best.1 { gap } else { best },
            );
        nodes.rotate_left(start);
    }
    nodes
}

/// The lock nodes among `children` that are ahead of `ours` in the queue, in lock order, or
/// `None` if `ours` is not among `children`: what a contender needs to know of a listing,
/// the same as the part of [`sorted_lock_nodes`] before our node, found in one pass that keeps
/// (and sorts) only the nodes ahead. With a long queue most names are behind ours, and this
/// runs at every handoff.
///
/// A node is ahead when our sequence follows its sequence on the 2^32 circle by less than
/// half of it (RFC 1982), which agrees with `sorted_lock_nodes` whenever the live queue spans
/// less than 2^31 values (its assumption too).
pub(crate) fn nodes_ahead(
    children: &[String],
    ours: &LockNode,
    lock_names: &[&str],
) -> Option<Vec<LockNode>> {
    let mut found = false;
    // Only the names ahead are copied: the listing itself is freed by the caller, off the
    // path of a waiter's wake-up where it can be.
    let mut ahead: Vec<LockNode> = children
        .iter()
        .filter_map(|name| {
            let (name_index, sequence) = name_and_sequence(name, lock_names)?;
            if sequence == ours.sequence && *name == ours.name {
                found = true;
                return None;
            }
            let ahead = LockNode::precedes(sequence, name, ours);
            ahead.then(|| LockNode {
                sequence,
                name: name.clone(),
                name_index,
            })
        })
        .collect();
    if !found {
        return None;
    }
    // Farthest ahead first.
    ahead.sort_unstable_by(|a, b| {
        let behind = |n: &LockNode| ours.circle().wrapping_sub(n.circle());
        behind(b).cmp(&behind(a)).then_with(|| a.name.cmp(&b.name))
    });
    Some(ahead)
}

/// The data Curator's `Revoker` writes into a lock node to ask its holder to release.
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// The largest node data zklock sends. ZooKeeper refuses requests over `jute.maxbuffer`
/// (1 MiB by default) by dropping the connection, which would look like an outage.
pub(crate) const MAX_NODE_DATA: usize = 1_000_000;

pub(crate) fn check_data_size(data: &[u8]) -> Result<()> {
    if data.len() > MAX_NODE_DATA {
        return Err(Error::InvalidArgument(
            "node data is larger than ZooKeeper accepts (1,000,000 bytes at most here)",
        ));
    }
    Ok(())
}

/// Data stored in every lock node, so holders and waiters can be inspected.
pub(crate) fn owner_data() -> Vec<u8> {
    // Read once: every acquisition writes it, and reading a file costs four system calls.
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let host = HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown".into())
    });
    let thread = std::thread::current();
    let thread = thread
        .name()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{:?}", thread.id()));
    format!("host={host} pid={} thread={thread}", std::process::id()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mutex node's name (the recipes' names are in the catalogue; any name will do here).
    const LOCK_NAME: &str = "lock-";

    #[test]
    fn sequence_is_the_suffix_after_the_last_lock_name() {
        assert_eq!(sequence_of("_c_0f1e-lock-0000000042", LOCK_NAME), Some(42));
        assert_eq!(sequence_of("lock-0000000007", LOCK_NAME), Some(7));
        assert_eq!(
            sequence_of("_c_a-lock-b-lock-0000000003", LOCK_NAME),
            Some(3)
        );
        assert_eq!(
            sequence_of("x-lock--2147483648", LOCK_NAME),
            Some(-2_147_483_648)
        );
        assert_eq!(sequence_of("x-lock--000000005", LOCK_NAME), Some(-5));
        assert_eq!(sequence_of("x-lock--00000005", LOCK_NAME), None);
        assert_eq!(sequence_of("lock-12", LOCK_NAME), None);
        assert_eq!(sequence_of("lock-00000000x1", LOCK_NAME), None);
        assert_eq!(sequence_of("leases", LOCK_NAME), None);
    }

    fn order(sequences: &[i32]) -> Vec<i64> {
        let names = sequences
            .iter()
            .enumerate()
            .map(|(i, s)| format!("_c_{i}-lock-{s:010}"))
            .collect();
        sorted_lock_nodes(names, &[LOCK_NAME])
            .iter()
            .map(|n| n.sequence)
            .collect()
    }

    #[test]
    fn orders_across_the_sequence_wrap() {
        // The signed counter passes i32::MAX, then -1 -> 0; listings come in any order.
        assert_eq!(
            order(&[i32::MIN, i32::MAX - 1, i32::MIN + 1, i32::MAX]),
            [2147483646, 2147483647, -2147483648, -2147483647]
        );
        assert_eq!(order(&[0, -1, 1, -2]), [-2, -1, 0, 1]);
        assert_eq!(order(&[-7]), [-7]);
        assert!(order(&[]).is_empty());
        // No wrap: plain numeric order, even with gaps in the queue.
        assert_eq!(order(&[100, 5, 7, 1_000_000]), [5, 7, 100, 1_000_000]);
        // A newcomer after the wrap queues behind the holder from before it.
        let holder = i32::MAX - 3;
        assert_eq!(order(&[i32::MIN + 2, holder])[0], i64::from(holder));
        // Still serial when the queue straddles the wrap point of the u32 image (-1 -> 0) and
        // the listing is long.
        let queue: Vec<i32> = (-500..500).rev().collect();
        let expected: Vec<i64> = (-500..500).collect();
        assert_eq!(order(&queue), expected);
    }

    #[test]
    fn orders_by_sequence_only_across_prefixes() {
        // Curator's protected names, a bare name and a kazoo-style name interleave by sequence.
        let children = vec![
            "_c_ffffffff-0000-0000-0000-000000000000-lock-0000000003".to_owned(),
            "lock-0000000010".to_owned(),
            "_c_00000000-0000-0000-0000-000000000000-lock-0000000007".to_owned(),
            "zzzz-lock-0000000001".to_owned(),
            "not-a-lock-node".to_owned(),
        ];
        let order: Vec<i64> = sorted_lock_nodes(children, &[LOCK_NAME])
            .iter()
            .map(|n| n.sequence)
            .collect();
        assert_eq!(order, vec![1, 3, 7, 10]);
    }

    #[test]
    fn read_and_write_nodes_sort_together_like_curator() {
        let children = vec![
            "_c_b-__WRIT__0000000002".to_owned(),
            "_c_a-__READ__0000000001".to_owned(),
            "_c_c-__READ__0000000003".to_owned(),
            "_c_d-lock-0000000000".to_owned(),
        ];
        let nodes = sorted_lock_nodes(children, &["__READ__", "__WRIT__"]);
        let order: Vec<(i64, usize)> = nodes.iter().map(|n| (n.sequence, n.name_index)).collect();
        assert_eq!(order, vec![(1, 0), (2, 1), (3, 0)]);
    }

    #[test]
    fn the_fast_parse_agrees_with_the_last_occurrence_rule() {
        let names = [
            "_c_0f1e-lock-0000000042",
            "lock-0000000007",
            "_c_a-lock-b-lock-0000000003",
            "x-lock--2147483648",
            "x-lock--000000005",
            "x-lock--00000005",
            "lock-lock-0000000001",
            "lock-0000000001lock-0000000002",
            "ünïcødé-lock-0000000009",
            "lock-00000000é1",
            "lock-12",
            "lock-00000000000",
            "leases",
            "",
        ];
        for name in names {
            let slow = name
                .rfind(LOCK_NAME)
                .and_then(|_| sequence_of(name, LOCK_NAME))
                .map(|s| (0, s));
            assert_eq!(name_and_sequence(name, &[LOCK_NAME]), slow, "{name}");
        }
        let rw = ["__READ__", "__WRIT__"];
        let cases = [
            ("_c_a-__READ__0000000001", Some((0, 1))),
            ("_c_a-__WRIT__0000000002", Some((1, 2))),
            ("__READ__0000000001__WRIT__0000000002", Some((1, 2))),
            ("__WRIT____READ__0000000003", Some((0, 3))),
            ("_c_a-lock-0000000004", None),
        ];
        for (name, expected) in cases {
            assert_eq!(name_and_sequence(name, &rw), expected, "{name}");
        }
    }

    /// A small deterministic generator, so a failure can be replayed.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn nodes_ahead_are_the_sorted_queue_before_ours() {
        let mut rng = 0x9e37_79b9_7f4a_7c15;
        let bases = [0i64, 1_000, i64::from(i32::MAX) - 20, -30, -1];
        for round in 0..2_000 {
            let base = bases[round % bases.len()];
            let len = 1 + (xorshift(&mut rng) % 40) as usize;
            // Distinct sequences from a window of 3 * len values after `base`, wrapping like
            // ZooKeeper's signed counter.
            let mut sequences: Vec<i64> = (0..3 * len as i64)
                .map(|i| i64::from((base + i) as i32))
                .collect();
            for i in (1..sequences.len()).rev() {
                sequences.swap(i, (xorshift(&mut rng) % (i as u64 + 1)) as usize);
            }
            sequences.truncate(len);
            let names = &["__READ__", "__WRIT__"];
            let children: Vec<String> = sequences
                .iter()
                .map(|&s| {
                    let kind = names[(xorshift(&mut rng) % 2) as usize];
                    format!("_c_{:x}-{kind}{s:010}", xorshift(&mut rng))
                })
                .chain(["not-a-lock".to_owned()])
                .collect();
            let sorted = sorted_lock_nodes(children.clone(), names);
            let at = (xorshift(&mut rng) % len as u64) as usize;
            let ours = sorted[at].clone();
            assert_eq!(
                nodes_ahead(&children, &ours, names).as_deref(),
                Some(&sorted[..at]),
                "round {round}: {children:?}"
            );
            let without: Vec<String> = children.into_iter().filter(|n| *n != ours.name).collect();
            assert_eq!(nodes_ahead(&without, &ours, names), None);
        }
    }

    #[test]
    fn protected_prefix_has_curator_shape() {
        let id = Uuid::nil();
        assert_eq!(
            protected_prefix(&id),
            "_c_00000000-0000-0000-0000-000000000000-"
        );
    }
}
