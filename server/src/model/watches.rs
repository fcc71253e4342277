//! ZooKeeper's `WatchManager`: watches per path and connection, one-shot (standard) or
//! persistent, and persistent-recursive ones that also fire for every node below.

use std::collections::{HashMap, HashSet};

use super::ConnId;

/// A watch's modes on one path for one connection (several can coexist).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Modes {
    pub(crate) standard: bool,
    pub(crate) persistent: bool,
    pub(crate) recursive: bool,
}

impl Modes {
    fn is_empty(self) -> bool {
        !(self.standard || self.persistent || self.recursive)
    }
}

/// Which mode an operation is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Standard,
    Persistent,
    Recursive,
}

fn set(m: &mut Modes, mode: Mode, on: bool) -> bool {
    let slot = match mode {
        Mode::Standard => &mut m.standard,
        Mode::Persistent => &mut m.persistent,
        Mode::Recursive => &mut m.recursive,
    };
    let was = *slot;
    *slot = on;
    was
}

fn has(m: Modes, mode: Mode) -> bool {
    match mode {
        Mode::Standard => m.standard,
        Mode::Persistent => m.persistent,
        Mode::Recursive => m.recursive,
    }
}

/// One watch table (ZooKeeper keeps two: data watches and child watches).
#[derive(Debug, Default)]
pub(crate) struct WatchTable {
    by_path: HashMap<String, HashMap<ConnId, Modes>>,
    by_conn: HashMap<ConnId, HashSet<String>>,
    recursive: usize,
}

impl WatchTable {
    pub(crate) fn add(&mut self, path: &str, conn: ConnId, mode: Mode) {
        let modes = self
            .by_path
            .entry(path.to_owned())
            .or_default()
            .entry(conn)
            .or_default();
        if !set(modes, mode, true) && mode == Mode::Recursive {
            self.recursive += 1;
        }
        self.by_conn
            .entry(conn)
            .or_default()
            .insert(path.to_owned());
    }

    /// Removes one mode (or any, for `None`); whether something was removed.
    pub(crate) fn remove(&mut self, path: &str, conn: ConnId, mode: Option<Mode>) -> bool {
        let Some(conns) = self.by_path.get_mut(path) else {
            return false;
        };
        let Some(modes) = conns.get_mut(&conn) else {
            return false;
        };
        let removed = match mode {
            Some(m) => {
                let was = set(modes, m, false);
                if was && m == Mode::Recursive {
                    self.recursive -= 1;
                }
                was
            }
            None => {
                if modes.recursive {
                    self.recursive -= 1;
                }
                *modes = Modes::default();
                true
            }
        };
        if modes.is_empty() {
            conns.remove(&conn);
            if conns.is_empty() {
                self.by_path.remove(path);
            }
            if let Some(paths) = self.by_conn.get_mut(&conn) {
                paths.remove(path);
            }
        }
        removed
    }

    pub(crate) fn contains(&self, path: &str, conn: ConnId, mode: Option<Mode>) -> bool {
        self.by_path
            .get(path)
            .and_then(|c| c.get(&conn))
            .is_some_and(|m| mode.map_or(!m.is_empty(), |mode| has(*m, mode)))
    }

    /// Every watch of a connection gone (it closed).
    pub(crate) fn remove_conn(&mut self, conn: ConnId) {
        for path in self.by_conn.remove(&conn).unwrap_or_default() {
            if let Some(conns) = self.by_path.get_mut(&path) {
                if let Some(m) = conns.remove(&conn) {
                    if m.recursive {
                        self.recursive -= 1;
                    }
                }
                if conns.is_empty() {
                    self.by_path.remove(&path);
                }
            }
        }
    }

    /// The connections a change of `path` notifies (`WatchManager.triggerWatch`): watches on
    /// the path itself (one-shot ones removed), and recursive watches on its ancestors.
    pub(crate) fn trigger(&mut self, path: &str) -> Vec<ConnId> {
        let mut fired = Vec::new();
        if let Some(conns) = self.by_path.get_mut(path) {
            conns.retain(|conn, modes| {
                fired.push(*conn);
                modes.standard = false;
                if modes.is_empty() {
                    if let Some(paths) = self.by_conn.get_mut(conn) {
                        paths.remove(path);
                    }
                    false
                } else {
                    true
                }
            });
            if conns.is_empty() {
                self.by_path.remove(path);
            }
        }
        if self.recursive > 0 {
            let mut p = path;
            while p != "/" {
                p = match p.rfind('/') {
                    Some(0) => "/",
                    Some(i) => &p[..i],
                    None => break,
                };
                if let Some(conns) = self.by_path.get(p) {
                    for (conn, m) in conns {
                        if m.recursive && !fired.contains(conn) {
                            fired.push(*conn);
                        }
                    }
                }
            }
        }
        fired.sort_unstable();
        fired.dedup();
        fired
    }

    /// How many (path, connection) watches.
    pub(crate) fn count(&self) -> usize {
        self.by_path.values().map(HashMap::len).sum()
    }

    pub(crate) fn paths(&self) -> impl Iterator<Item = (&String, &HashMap<ConnId, Modes>)> {
        self.by_path.iter()
    }

    pub(crate) fn conn_paths(&self, conn: ConnId) -> impl Iterator<Item = &String> {
        self.by_conn.get(&conn).into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_fires_once_persistent_stays_recursive_reaches_descendants() {
        let mut t = WatchTable::default();
        t.add("/a", 1, Mode::Standard);
        t.add("/a", 2, Mode::Persistent);
        t.add("/", 3, Mode::Recursive);
        assert_eq!(t.trigger("/a"), vec![1, 2, 3]);
        assert_eq!(t.trigger("/a"), vec![2, 3]);
        assert_eq!(t.trigger("/a/b/c"), vec![3]);
        assert!(t.remove("/", 3, Some(Mode::Recursive)));
        assert_eq!(t.trigger("/a/b"), Vec::<ConnId>::new());
        t.remove_conn(2);
        assert_eq!(t.count(), 0);
    }
}
