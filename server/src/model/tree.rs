//! The data tree: nodes with their data, ACL, stored stat and children, and the indexes
//! ZooKeeper keeps beside it (ephemerals per session, containers, TTL nodes).

use std::collections::{BTreeSet, HashMap};

use super::children::Children;

use zklock_proto::{perms, Acl, Stat};

/// `EphemeralType.CONTAINER_EPHEMERAL_OWNER`.
pub(crate) const CONTAINER_OWNER: i64 = i64::MIN;
const EXTENDED_MASK: i64 = 0xff00_0000_0000_0000_u64 as i64;
/// The largest TTL (`EphemeralType.TTL.maxValue()`), ms.
pub(crate) const MAX_TTL: i64 = 0x0000_00ff_ffff_ffff;

/// What an owner field says a node is (`EphemeralType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

pub(crate) fn kind_of(owner: i64) -> Kind {
    if owner == CONTAINER_OWNER {
        Kind::Container
    } else if owner & EXTENDED_MASK == EXTENDED_MASK {
        Kind::Ttl(owner & MAX_TTL)
    } else if owner == 0 {
        Kind::Persistent
    } else {
        Kind::Ephemeral(owner)
    }
}

pub(crate) fn ttl_owner(ttl: i64) -> i64 {
    EXTENDED_MASK | ttl
}

/// A node as stored. `cversion` is the stored count of child creates; clients see
/// `cversion * 2 - children` (ZooKeeper's `DataNode.copyStat`).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) data: Vec<u8>,
    pub(crate) acl: Vec<Acl>,
    pub(crate) czxid: i64,
    pub(crate) mzxid: i64,
    pub(crate) ctime: i64,
    pub(crate) mtime: i64,
    pub(crate) version: i32,
    pub(crate) cversion: i32,
    pub(crate) aversion: i32,
    pub(crate) owner: i64,
    pub(crate) pzxid: i64,
    pub(crate) children: Children,
}

impl Node {
    pub(crate) fn new(data: Vec<u8>, acl: Vec<Acl>, zxid: i64, time: i64, owner: i64) -> Node {
        Node {
            data,
            acl,
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            version: 0,
            cversion: 0,
            aversion: 0,
            owner,
            pzxid: zxid,
            children: Children::default(),
        }
    }

    /// The stat as clients see it.
    pub(crate) fn stat(&self) -> Stat {
        let n = self.children.len() as i32;
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion.wrapping_mul(2).wrapping_sub(n),
            aversion: self.aversion,
            ephemeral_owner: match kind_of(self.owner) {
                Kind::Ephemeral(s) => s,
                _ => 0,
            },
            data_length: self.data.len() as i32,
            num_children: n,
            pzxid: self.pzxid,
        }
    }
}

/// The parent of a valid path other than `/`.
pub(crate) fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

pub(crate) fn child_name(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

/// `PathUtils.validatePath`.
pub(crate) fn valid_path(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    if path.len() == 1 {
        return true;
    }
    if path.ends_with('/') {
        return false;
    }
    for seg in path[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return false;
        }
    }
    !path.chars().any(|c| {
        c == '\0'
            || ('\u{1}'..='\u{1f}').contains(&c)
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c)
    })
}

/// The nodes ZooKeeper refuses to delete (`DataTree.isSpecialPath`).
pub(crate) fn special(path: &str) -> bool {
    matches!(
        path,
        "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
    )
}

/// The tree and its indexes.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) nodes: HashMap<String, Node>,
    pub(crate) ephemerals: HashMap<i64, BTreeSet<String>>,
    pub(crate) containers: BTreeSet<String>,
    pub(crate) ttls: BTreeSet<String>,
}

impl Tree {
    /// `/`, `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config` as a fresh 3.9 server has
    /// them.
    pub(crate) fn new() -> Tree {
        let mut nodes = HashMap::new();
        let mut root = Node::new(Vec::new(), super::acl::open(), 0, 0, 0);
        root.children.insert("zookeeper".into());
        let mut zk = Node::new(Vec::new(), super::acl::open(), 0, 0, 0);
        zk.children.insert("quota".into());
        zk.children.insert("config".into());
        nodes.insert("/".into(), root);
        nodes.insert("/zookeeper".into(), zk);
        nodes.insert(
            "/zookeeper/quota".into(),
            Node::new(Vec::new(), super::acl::open(), 0, 0, 0),
        );
        nodes.insert(
            "/zookeeper/config".into(),
            Node::new(
                Vec::new(),
                vec![Acl::new(perms::READ, "world", "anyone")],
                0,
                0,
                0,
            ),
        );
        Tree {
            nodes,
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
        }
    }

    /// A tree of these nodes (a snapshot's), its indexes rebuilt from their owners.
    pub(crate) fn from_nodes(nodes: HashMap<String, Node>) -> Tree {
        let mut t = Tree {
            nodes: HashMap::new(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
        };
        for (path, node) in &nodes {
            t.index(path, node.owner);
        }
        t.nodes = nodes;
        t
    }

    pub(crate) fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    pub(crate) fn get_mut(&mut self, path: &str) -> Option<&mut Node> {
        self.nodes.get_mut(path)
    }

    fn index(&mut self, path: &str, owner: i64) {
        match kind_of(owner) {
            Kind::Container => {
                self.containers.insert(path.to_owned());
            }
            Kind::Ttl(_) => {
                self.ttls.insert(path.to_owned());
            }
            Kind::Ephemeral(s) => {
                self.ephemerals
                    .entry(s)
                    .or_default()
                    .insert(path.to_owned());
            }
            Kind::Persistent => {}
        }
    }

    fn unindex(&mut self, path: &str, owner: i64) {
        match kind_of(owner) {
            Kind::Container => {
                self.containers.remove(path);
            }
            Kind::Ttl(_) => {
                self.ttls.remove(path);
            }
            Kind::Ephemeral(s) => {
                if let Some(set) = self.ephemerals.get_mut(&s) {
                    set.remove(path);
                    if set.is_empty() {
                        self.ephemerals.remove(&s);
                    }
                }
            }
            Kind::Persistent => {}
        }
    }

    /// Puts `node` at `path` (whose parent exists), raising the parent's stored cversion and
    /// pzxid as a create does. As `DataTree.createNode`, both move only if the cversion rises:
    /// at 2^31-1 the counter stays (and sequential names repeat), it never wraps.
    pub(crate) fn insert(&mut self, path: &str, node: Node, zxid: i64) {
        let parent = self
            .nodes
            .get_mut(parent_of(path))
            .expect("the caller checked the parent");
        parent.children.insert(child_name(path).to_owned());
        let next = parent.cversion.wrapping_add(1);
        if next > parent.cversion {
            parent.cversion = next;
            parent.pzxid = zxid;
        }
        self.index(path, node.owner);
        self.nodes.insert(path.to_owned(), node);
    }

    /// Removes the (childless) node at `path`; a delete raises only the parent's pzxid.
    pub(crate) fn remove(&mut self, path: &str, zxid: i64) -> Option<Node> {
        let node = self.nodes.remove(path)?;
        if let Some(parent) = self.nodes.get_mut(parent_of(path)) {
            parent.children.remove(child_name(path));
            if zxid > parent.pzxid {
                parent.pzxid = zxid;
            }
        }
        self.unindex(path, node.owner);
        Some(node)
    }

    /// Restores `path` to `prior` (a multi's rollback), keeping the indexes right.
    pub(crate) fn restore(&mut self, path: &str, prior: Option<Node>) {
        if let Some(cur) = self.nodes.remove(path) {
            self.unindex(path, cur.owner);
        }
        if let Some(node) = prior {
            self.index(path, node.owner);
            self.nodes.insert(path.to_owned(), node);
        }
    }

    /// How many nodes below `path`, at any depth (`getAllChildrenNumber`).
    pub(crate) fn descendants(&self, path: &str) -> usize {
        let mut count = 0;
        let mut stack = vec![path.to_owned()];
        while let Some(p) = stack.pop() {
            if let Some(n) = self.nodes.get(&p) {
                for c in n.children.names() {
                    count += 1;
                    stack.push(if p == "/" {
                        format!("/{c}")
                    } else {
                        format!("{p}/{c}")
                    });
                }
            }
        }
        count
    }

    /// Total bytes of data (for `mntr`).
    pub(crate) fn data_size(&self) -> usize {
        self.nodes.iter().map(|(p, n)| p.len() + n.data.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_validate_as_zookeeper_s() {
        for ok in ["/", "/a", "/a/b", "/a-0000000001", "/zookeeper"] {
            assert!(valid_path(ok), "{ok}");
        }
        for bad in [
            "", "a", "/a/", "//a", "/a//b", "/./a", "/a/..", "/a\u{0}b", "/a\u{1}",
        ] {
            assert!(!valid_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_visible_cversion_counts_creates_and_deletes() {
        let mut t = Tree::new();
        assert_eq!(t.get("/").unwrap().stat().cversion, -1);
        t.insert("/a", Node::new(vec![], vec![], 5, 0, 0), 5);
        t.remove("/a", 6);
        let root = t.get("/").unwrap().stat();
        assert_eq!((root.cversion, root.pzxid, root.num_children), (1, 6, 1));
    }

    #[test]
    fn the_stored_cversion_stops_at_its_limit() {
        let mut t = Tree::new();
        t.get_mut("/").unwrap().cversion = i32::MAX - 1;
        t.insert("/a", Node::new(vec![], vec![], 5, 0, 0), 5);
        assert_eq!(t.get("/").unwrap().cversion, i32::MAX);
        t.insert("/b", Node::new(vec![], vec![], 6, 0, 0), 6);
        let root = t.get("/").unwrap();
        assert_eq!((root.cversion, root.pzxid), (i32::MAX, 5));
    }
}
