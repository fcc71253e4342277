//! A node's children, listed in the order ZooKeeper lists them: the iteration order of the
//! Java `HashSet<String>` it keeps them in (`new HashSet<>(8)`, never shrunk). Clients should
//! not rely on that order, but some do, and a differential test compares it.

use std::collections::HashMap;

#[derive(Debug, Clone, Default)]
pub(crate) struct Children {
    /// Each child with the order it was added in (its place within its hash bucket).
    seq: HashMap<String, u64>,
    next: u64,
    /// The Java table's capacity: 0 until the first child, then 8, doubled whenever the size
    /// passes three quarters of it.
    cap: u32,
}

/// `String.hashCode` over UTF-16 code units, then `HashMap.hash`'s spreading.
fn java_hash(s: &str) -> u32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    let h = h as u32;
    h ^ (h >> 16)
}

impl Children {
    pub(crate) fn insert(&mut self, name: String) -> bool {
        if self.seq.contains_key(&name) {
            return false;
        }
        if self.cap == 0 {
            self.cap = 8;
        }
        self.seq.insert(name, self.next);
        self.next += 1;
        if self.seq.len() > (self.cap as usize * 3) / 4 {
            self.cap *= 2;
        }
        true
    }

    pub(crate) fn remove(&mut self, name: &str) -> bool {
        self.seq.remove(name).is_some()
    }

    pub(crate) fn len(&self) -> usize {
        self.seq.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.seq.is_empty()
    }

    /// The names in any order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &String> {
        self.seq.keys()
    }

    /// The names in Java's `HashSet` iteration order: by bucket, then by insertion (a resize
    /// keeps each bucket's relative order).
    pub(crate) fn listed(&self) -> Vec<String> {
        let mask = self.cap.saturating_sub(1);
        let mut v: Vec<(u32, u64, &String)> = self
            .seq
            .iter()
            .map(|(name, seq)| (java_hash(name) & mask, *seq, name))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, _, n)| n.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_s_order() {
        // As ZooKeeper 3.9.5 listed them (checked against the real server).
        let mut c = Children::default();
        for n in ["a", "nx", "c", "e", "m", "mc"] {
            c.insert(n.to_owned());
        }
        assert_eq!(c.listed(), ["a", "nx", "c", "e", "m", "mc"]);
        let mut c = Children::default();
        for n in ["s-0000000000", "s-0000000001"] {
            c.insert(n.to_owned());
        }
        assert_eq!(c.listed(), ["s-0000000001", "s-0000000000"]);
    }
}
