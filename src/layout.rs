//! Apache Curator's node layout, which zklock shares so that both interoperate on one lock:
//! node names (the protected prefix, each recipe's name before the sequence number), their
//! order, the revocation marker, and the data zklock stores in its nodes.

use crate::error::{Error, Result};

/// The text before the sequence number in a mutex node's name (Curator: `LockInternals`
/// `lockName` of `InterProcessMutex`).
pub(crate) const LOCK_NAME: &str = "lock-";

/// Curator's protected-name prefix: `_c_<uuid>-`. The uuid makes a node findable after a
/// `create` whose reply was lost.
pub(crate) fn protected_prefix(id: &uuid::Uuid) -> String {
    format!("_c_{}-", id.as_hyphenated())
}

/// The sequence number of a lock node: the digits after the last `lock_name`. `None` for
/// children that are not lock nodes of this kind.
pub(crate) fn sequence_of(name: &str, lock_name: &str) -> Option<i64> {
    let start = name.rfind(lock_name)? + lock_name.len();
    let digits = &name[start..];
    // ZooKeeper appends a signed 32-bit counter formatted "%010d": ten digits, or after the
    // counter wrapped a minus sign and at least nine. Anything else is not ours to order.
    let (unsigned, min_len) = match digits.strip_prefix('-') {
        Some(unsigned) => (unsigned, 9),
        None => (digits, 10),
    };
    if unsigned.len() < min_len || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
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

/// The lock nodes among `children` carrying one of `lock_names`, in lock order: by sequence
/// only, whatever the prefix, so nodes of other libraries using the same naming (Curator's)
/// interleave correctly. A name's sequence is the text after the last occurrence of any of
/// the names, as Curator's `fixForSorting` does.
///
/// The parent's counter is a signed 32-bit integer that every create and every delete
/// advances, so a busy lock path that is never emptied wraps (after about 1.07e9
/// acquisitions): `2147483647` is followed by `-2147483648`, and later `-1` by `0`. Sequences
/// are therefore compared as serial numbers (RFC 1982): the live queue always spans far less
/// than 2^31 values, so it is ordered from the node that follows the largest gap on the
/// 2^32 circle. (Curator compares the suffixes as text, which puts wrapped, negative
/// sequences first: a Curator peer on a wrapped path can disagree with zklock about who
/// holds the lock. Recreating an idle lock path resets its counter.)
pub(crate) fn sorted_lock_nodes(children: Vec<String>, lock_names: &[&str]) -> Vec<LockNode> {
    let mut nodes: Vec<LockNode> = children
        .into_iter()
        .filter_map(|name| {
            let (name_index, lock_name) = lock_names
                .iter()
                .enumerate()
                .filter_map(|(i, n)| name.rfind(n).map(|at| (at, i, *n)))
                .max_by_key(|(at, _, _)| *at)
                .map(|(_, i, n)| (i, n))?;
            sequence_of(&name, lock_name).map(|sequence| LockNode {
                sequence,
                name,
                name_index,
            })
        })
        .collect();
    // The counter's value as a point on the 2^32 circle (truncation is the point).
    let circle = |n: &LockNode| n.sequence as u32;
    nodes.sort_unstable_by(|a, b| circle(a).cmp(&circle(b)).then_with(|| a.name.cmp(&b.name)));
    // Start after the largest gap between neighbours on the circle: the gap that wraps.
    if let Some(last) = nodes.last() {
        let wrap_gap = circle(&nodes[0]).wrapping_sub(circle(last));
        let (start, _) = nodes
            .windows(2)
            .enumerate()
            .map(|(i, pair)| (i + 1, circle(&pair[1]).wrapping_sub(circle(&pair[0]))))
            .fold(
                (0, wrap_gap),
                |best, gap| if gap.1 > best.1 { gap } else { best },
            );
        nodes.rotate_left(start);
    }
    nodes
}

/// Curator's `InterProcessReadWriteLock` reader and writer names (same length, the sequence
/// follows directly).
pub(crate) const READ_NAME: &str = "__READ__";
pub(crate) const WRITE_NAME: &str = "__WRIT__";

/// Curator's `LeaderLatch` participant name.
pub(crate) const LATCH_NAME: &str = "latch-";

/// The name of Curator's semaphore lease nodes (`InterProcessSemaphoreV2`).
pub(crate) const LEASE_NAME: &str = "lease-";

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
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into());
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
    fn protected_prefix_has_curator_shape() {
        let id = uuid::Uuid::nil();
        assert_eq!(
            protected_prefix(&id),
            "_c_00000000-0000-0000-0000-000000000000-"
        );
    }
}
