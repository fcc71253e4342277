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

    /// The names in the order they were added, and the Java table's capacity: what a snapshot
    /// keeps, so that [`from_parts`](Self::from_parts) lists them in the same order.
    pub(crate) fn parts(&self) -> (Vec<&String>, u32) {
        let mut v: Vec<(&String, u64)> = self.seq.iter().map(|(n, s)| (n, *s)).collect();
        v.sort_unstable_by_key(|(_, s)| *s);
        (v.into_iter().map(|(n, _)| n).collect(), self.cap)
    }

    /// Children from [`parts`](Self::parts): added in that order, on a table of that capacity
    /// (never smaller than the names need: a table does not shrink).
    pub(crate) fn from_parts(names: Vec<String>, cap: u32) -> Children {
        let mut c = Children::default();
        for n in names {
            c.insert(n);
        }
        c.cap = c.cap.max(cap);
        c
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

    #[test]
    fn parts_rebuild_the_same_listing() {
        let mut c = Children::default();
        for i in 0..20 {
            c.insert(format!("n{i}"));
        }
        for i in 0..15 {
            c.remove(&format!("n{i}"));
        }
        let (names, cap) = c.parts();
        let names = names.into_iter().cloned().collect();
        let back = Children::from_parts(names, cap);
        assert_eq!(back.listed(), c.listed());
        assert_eq!(back.cap, 32, "the capacity kept, though 5 names need less");
    }
}
