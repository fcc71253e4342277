//! Editing a stopped ZooKeeper server's snapshot (3.6 to 3.9), to give a test a state it could not
//! reach through the API in reasonable time (a lock path whose child counter is near 2^31).
//!
//! The format (`FileSnap.serialize`, `SerializeUtils.serializeSnapshot`, `DataTree.serialize`),
//! in jute's big-endian encoding (a string or buffer is an int length, -1 for none, then its
//! bytes):
//!
//! * file header: magic `ZKSN` (int), version (int), dbid (long);
//! * sessions: count (int), then per session its id (long) and timeout (int);
//! * the ACL cache: count (int), then per entry its key (long) and a vector of ACLs: count
//!   (int), then per ACL perms (int), scheme (string), id (string);
//! * every node: its path (string; the root's is ""), its data (buffer), its ACL key (long)
//!   and its `StatPersisted`: czxid, mzxid, ctime, mtime (longs), version, cversion, aversion
//!   (ints), ephemeralOwner, pzxid (longs); the tree ends with the path "/";
//! * a seal (`SnapStream.sealStream`): the Adler-32 of every byte before it (long), then "/";
//! * with `zookeeper.digest.enabled` (the default), the zxid digest: zxid (long), digest
//!   version (int), digest (long), and a second seal over everything before it;
//! * from ZooKeeper 3.9 on, the last processed zxid (long) and one more seal.
//!
//! The existing seals are checked before anything is changed, so a file this reader misreads
//! fails loudly instead of being patched in the wrong place.

use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"ZKSN";

/// The snapshot with the highest zxid (`snapshot.<hex zxid>`) in `dir`.
pub fn newest(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let zxid = u64::from_str_radix(name.strip_prefix("snapshot.")?, 16).ok()?;
            Some((zxid, entry.path()))
        })
        .max()
        .unwrap_or_else(|| panic!("no snapshot in {}", dir.display()))
        .1
}

/// Adler-32 of `bytes`, as `java.util.zip.Adler32` computes it.
pub fn adler32(bytes: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in bytes.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let end = self.pos.checked_add(n).filter(|&end| end <= self.buf.len());
        let end = end.unwrap_or_else(|| {
            panic!(
                "snapshot ends at {} reading {n} bytes at {}",
                self.buf.len(),
                self.pos
            )
        });
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        bytes
    }

    fn int(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }

    fn long(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }

    /// A buffer or string; `None` for a null one (length -1).
    fn bytes(&mut self) -> Option<&[u8]> {
        let len = self.int();
        if len == -1 {
            return None;
        }
        let len = usize::try_from(len).unwrap_or_else(|_| panic!("length {len}"));
        Some(self.take(len))
    }

    fn count(&mut self) -> usize {
        let n = self.int();
        usize::try_from(n).unwrap_or_else(|_| panic!("count {n} at {}", self.pos - 4))
    }

    /// A seal at the current position: checks it against the bytes before it.
    fn seal(&mut self) -> usize {
        let at = self.pos;
        let stored = self.long();
        let computed = i64::from(adler32(&self.buf[..at]));
        assert_eq!(stored, computed, "seal at {at} does not match: misread");
        assert_eq!(
            self.bytes(),
            Some(&b"/"[..]),
            "seal at {at} not closed by \"/\""
        );
        at
    }
}

/// Whether a seal (the Adler-32 of every byte before it, then "/") is at `at`.
fn seal_at(buf: &[u8], at: usize) -> bool {
    let Some(sum) = buf.get(at..at + 8) else {
        return false;
    };
    let sum = i64::from_be_bytes(sum.try_into().unwrap());
    sum == i64::from(adler32(&buf[..at])) && buf.get(at + 8..at + 13) == Some(&[0, 0, 0, 1, b'/'])
}

/// Where the fields to patch are: the `cversion` of each node, and the seals.
struct Layout {
    /// (path, offset of its cversion int).
    cversions: Vec<(String, usize)>,
    /// Offsets of the seals' checksums, in order.
    seals: Vec<usize>,
}

fn layout(buf: &[u8]) -> Layout {
    let mut r = Reader { buf, pos: 0 };
    assert_eq!(r.take(4), MAGIC, "not an uncompressed snapshot");
    let version = r.int();
    assert_eq!(version, 2, "snapshot version");
    let _dbid = r.long();
    for _ in 0..r.count() {
        let (_session, _timeout) = (r.long(), r.int());
    }
    for _ in 0..r.count() {
        let _key = r.long();
        for _ in 0..r.count() {
            let _perms = r.int();
            let _scheme = r.bytes();
            let _id = r.bytes();
        }
    }
    let mut cversions = Vec::new();
    loop {
        let path = r.bytes().expect("a node's path");
        let path = String::from_utf8(path.to_vec()).expect("a UTF-8 path");
        if path == "/" {
            break;
        }
        let _data = r.bytes();
        let _acl = r.long();
        // czxid, mzxid, ctime, mtime; version.
        r.take(4 * 8 + 4);
        cversions.push((path, r.pos));
        // cversion, aversion; ephemeralOwner, pzxid.
        r.take(2 * 4 + 2 * 8);
    }
    let mut seals = vec![r.seal()];
    while r.pos < buf.len() {
        // A sealed trailer: the zxid digest (zxid, digest version, digest: 20 bytes), or from
        // ZooKeeper 3.9 on the last processed zxid (8 bytes). Whichever is followed by a seal
        // that matches.
        let len = [20, 8]
            .into_iter()
            .find(|&len| seal_at(buf, r.pos + len))
            .unwrap_or_else(|| panic!("no sealed trailer at {}: misread", r.pos));
        r.take(len);
        seals.push(r.seal());
    }
    assert_eq!(r.pos, buf.len(), "bytes after the last seal");
    Layout { cversions, seals }
}

/// Sets the child counter (`cversion`) of node `path` in snapshot `file` to `cversion` and
/// reseals it; returns the counter it had. Panics if the file is not a snapshot as described
/// above, or has no node `path`.
pub fn set_cversion(file: &Path, path: &str, cversion: i32) -> i32 {
    let mut buf = std::fs::read(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let layout = layout(&buf);
    let at = layout
        .cversions
        .iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| {
            panic!(
                "no node {path} in {} ({} nodes)",
                file.display(),
                layout.cversions.len()
            )
        })
        .1;
    let old = i32::from_be_bytes(buf[at..at + 4].try_into().unwrap());
    buf[at..at + 4].copy_from_slice(&cversion.to_be_bytes());
    // In order: a later seal covers the earlier ones.
    for &seal in &layout.seals {
        let sum = i64::from(adler32(&buf[..seal]));
        buf[seal..seal + 8].copy_from_slice(&sum.to_be_bytes());
    }
    // Read back: the seals match again and the counter is the one written.
    let check = self::layout(&buf);
    assert!(check.cversions.iter().any(|(p, a)| p == path && *a == at));
    std::fs::write(file, &buf).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    old
}
