//! What the git guard remembers of the directories made and emptied through the
//! mount ([`Marks`]): a tree of names, bounded, released when what it describes is
//! gone.

use std::collections::HashMap;

/// The most entries [`Marks`] holds (the root's aside).
pub(super) const MAX_ENTRIES: usize = 1 << 16;

/// The most bytes of names [`Marks`] holds.
pub(super) const MAX_NAME_BYTES: usize = 4 << 20;

/// The id of the workspace root (the empty path), the parent of top-level names.
const ROOT: u64 = 0;

/// Workspace-relative paths marked *made* (a directory made through the mount,
/// not renamed or removed since) or *vacated* (a directory that was not the
/// command's own was renamed away or removed there), as a tree of names: one entry
/// per name on the way to a mark, so a mark costs its last name and the names it
/// does not share with another mark, never a whole path per mark.
///
/// Invariants:
/// * An entry is kept only while it or an entry below it holds a mark: clearing a
///   mark releases the names that led only to it.
/// * Entries live in one flat table keyed by (parent id, name): no entry owns
///   another, so no walk, removal or drop recurses, whatever the depth.
/// * At most [`MAX_ENTRIES`] entries and [`MAX_NAME_BYTES`] of names. A mark that
///   does not fit is answered the safe way, the one that refuses: a *made* mark is
///   not made (the directory is not the command's own), and a *vacated* mark goes
///   on the nearest entry already on its way, up to the root (more paths count as
///   emptied), releasing everything below that entry.
#[derive(Debug, Default)]
pub(super) struct Marks {
    /// Keyed by [`key`]`(parent id, name)`.
    entries: HashMap<Box<[u8]>, Entry>,
    /// The root's marks (its `id` is [`ROOT`]).
    root: Entry,
    /// The last id given (a 64-bit counter: never reused).
    last_id: u64,
    /// The bytes of the names the table holds.
    name_bytes: usize,
}

#[derive(Debug, Default, Clone, Copy)]
struct Entry {
    id: u64,
    made: bool,
    vacated: bool,
    /// How many entries have this one as their parent.
    children: u32,
}

impl Entry {
    fn holds_nothing(&self) -> bool {
        !self.made && !self.vacated && self.children == 0
    }
}

/// The table key of `name` under the entry `parent`, written into `buf`.
fn key<'b>(buf: &'b mut Vec<u8>, parent: u64, name: &[u8]) -> &'b [u8] {
    buf.clear();
    buf.extend_from_slice(&parent.to_le_bytes());
    buf.extend_from_slice(name);
    buf
}

/// The parent id a table key was made with.
fn parent_in(key: &[u8]) -> u64 {
    let mut id = [0u8; 8];
    id.copy_from_slice(&key[..8]);
    u64::from_le_bytes(id)
}

/// The names of a workspace-relative path (none for the root).
fn names(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|n| !n.is_empty())
}

/// A path's entries as far as the table holds them: `keys[i]` and `entries[i]`
/// for its first `i + 1` names.
struct Way {
    keys: Vec<Box<[u8]>>,
    entries: Vec<Entry>,
    /// The table holds an entry for the whole path.
    whole: bool,
}

impl Way {
    /// The id of the deepest entry found (the root's when none).
    fn last_id(&self) -> u64 {
        self.entries.last().map_or(ROOT, |e| e.id)
    }
}

impl Marks {
    /// The entries on the way to `path`, outermost first.
    fn way(&self, path: &[u8]) -> Way {
        let mut buf = Vec::new();
        let mut way = Way {
            keys: Vec::new(),
            entries: Vec::new(),
            whole: true,
        };
        for name in names(path) {
            let k = key(&mut buf, way.last_id(), name);
            match self.entries.get(k) {
                Some(e) => {
                    way.keys.push(k.into());
                    way.entries.push(*e);
                }
                None => {
                    way.whole = false;
                    break;
                }
            }
        }
        way
    }

    /// Whether `path` is marked made.
    pub(super) fn made(&self, path: &[u8]) -> bool {
        let way = self.way(path);
        way.whole && way.entries.last().unwrap_or(&self.root).made
    }

    /// Whether `path` or a directory above it is marked vacated.
    pub(super) fn emptied(&self, path: &[u8]) -> bool {
        self.root.vacated || self.way(path).entries.iter().any(|e| e.vacated)
    }

    /// Marks `path` made; `false` when that does not fit (nothing is marked).
    pub(super) fn mark_made(&mut self, path: &[u8]) -> bool {
        self.mark(path, |e| e.made = true)
    }

    /// Marks `path` vacated, or, when that does not fit, the nearest entry on its
    /// way (see [`Marks`]): `false` then.
    pub(super) fn mark_vacated(&mut self, path: &[u8]) -> bool {
        if self.mark(path, |e| e.vacated = true) {
            return true;
        }
        let way = self.way(path);
        self.release_below(&way);
        match way.keys.last().and_then(|k| self.entries.get_mut(k)) {
            Some(e) => {
                e.vacated = true;
                e.children = 0;
            }
            None => {
                self.root.vacated = true;
            }
        }
        false
    }

    /// Forgets every mark at and below `path`, and the names that led only to them.
    pub(super) fn clear(&mut self, path: &[u8]) {
        let way = self.way(path);
        if !way.whole {
            return;
        }
        self.release_below(&way);
        if way.keys.is_empty() {
            self.root = Entry::default();
            return;
        }
        // The entry itself, then each one above that holds nothing any more.
        for (depth, k) in way.keys.iter().enumerate().rev() {
            if self.entries.remove(k).is_some() {
                self.name_bytes -= k.len() - 8;
            }
            let Some(up) = depth
                .checked_sub(1)
                .and_then(|d| self.entries.get_mut(&way.keys[d]))
            else {
                break;
            };
            up.children = up.children.saturating_sub(1);
            if !up.holds_nothing() {
                break;
            }
        }
    }

    /// Sets a mark on `path` with `set`, making the entries on its way; `false`
    /// when they do not fit (then nothing is made).
    fn mark(&mut self, path: &[u8], set: impl FnOnce(&mut Entry)) -> bool {
        let way = self.way(path);
        if way.whole {
            match way.keys.last().and_then(|k| self.entries.get_mut(k)) {
                Some(e) => set(e),
                None => set(&mut self.root),
            }
            return true;
        }
        let missing: Vec<&[u8]> = names(path).skip(way.keys.len()).collect();
        let bytes: usize = missing.iter().map(|n| n.len()).sum();
        if self.entries.len() + missing.len() > MAX_ENTRIES
            || self.name_bytes + bytes > MAX_NAME_BYTES
        {
            return false;
        }
        if let Some(e) = way.keys.last().and_then(|k| self.entries.get_mut(k)) {
            e.children += 1;
        }
        let mut parent = way.last_id();
        let mut buf = Vec::new();
        let mut set = Some(set);
        for (i, name) in missing.iter().enumerate() {
            self.last_id += 1;
            let mut e = Entry {
                id: self.last_id,
                children: u32::from(i + 1 < missing.len()),
                ..Entry::default()
            };
            if i + 1 == missing.len()
                && let Some(set) = set.take()
            {
                set(&mut e);
            }
            self.entries.insert(key(&mut buf, parent, name).into(), e);
            parent = e.id;
        }
        self.name_bytes += bytes;
        true
    }

    /// Removes every entry below the deepest entry of `way` (the root when it has
    /// none), leaving that entry's own `children` count to the caller.
    fn release_below(&mut self, way: &Way) {
        let (id, any) = match way.entries.last() {
            Some(e) => (e.id, e.children > 0),
            None => (ROOT, !self.entries.is_empty()),
        };
        if !any {
            return;
        }
        // One pass to index the table by parent, then down from `id`.
        let mut by_parent: HashMap<u64, Vec<Box<[u8]>>> = HashMap::new();
        for k in self.entries.keys() {
            by_parent.entry(parent_in(k)).or_default().push(k.clone());
        }
        let mut todo = vec![id];
        while let Some(p) = todo.pop() {
            for k in by_parent.remove(&p).unwrap_or_default() {
                if let Some(e) = self.entries.remove(&k) {
                    self.name_bytes -= k.len() - 8;
                    todo.push(e.id);
                }
            }
        }
    }

    /// How many entries are held (the root's aside).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_ENTRIES, MAX_NAME_BYTES, Marks};

    #[test]
    fn a_mark_costs_its_names_and_is_released_with_them() {
        let mut m = Marks::default();
        assert!(m.mark_made(b"a/b/c"));
        assert!(m.made(b"a/b/c") && !m.made(b"a/b") && !m.made(b"a/b/c/d"));
        assert_eq!(m.len(), 3);
        assert!(m.mark_made(b"a/x"));
        m.clear(b"a/b/c");
        assert!(!m.made(b"a/b/c") && m.made(b"a/x"));
        assert_eq!(m.len(), 2, "`a` and `a/x`");
        m.clear(b"a");
        assert!(!m.made(b"a/x"));
        assert_eq!((m.len(), m.name_bytes), (0, 0));
    }

    #[test]
    fn a_mark_above_another_is_kept_when_the_other_goes() {
        let mut m = Marks::default();
        assert!(m.mark_made(b"a") && m.mark_made(b"a/b"));
        m.clear(b"a/b");
        assert!(m.made(b"a") && !m.made(b"a/b"));
        assert_eq!(m.len(), 1);
        m.clear(b"nothing/here");
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn emptied_holds_below_a_vacated_mark() {
        let mut m = Marks::default();
        assert!(m.mark_vacated(b"p"));
        assert!(m.emptied(b"p") && m.emptied(b"p/q/r") && !m.emptied(b"pq"));
        assert!(!m.emptied(b"") && !m.emptied(b"o"));
        assert!(m.mark_made(b"p/q"));
        assert!(m.made(b"p/q") && m.emptied(b"p/q"));
        m.clear(b"p/q");
        assert!(m.emptied(b"p/q"), "the vacated mark above stays");
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn ten_thousand_marks_made_and_cleared_leave_nothing() {
        let mut m = Marks::default();
        for i in 0..10_000 {
            let p = format!("deep/er/d{i}");
            assert!(m.mark_made(p.as_bytes()));
            m.clear(p.as_bytes());
        }
        assert_eq!((m.len(), m.name_bytes), (0, 0));
    }

    #[test]
    fn a_chain_far_deeper_than_a_stack_is_marked_and_released() {
        let mut m = Marks::default();
        let path = vec!["d"; 50_000].join("/");
        assert!(m.mark_made(path.as_bytes()));
        assert!(m.made(path.as_bytes()) && !m.emptied(path.as_bytes()));
        m.clear(b"d");
        assert_eq!(m.len(), 0);
        assert!(m.mark_made(path.as_bytes()));
        drop(m);
    }

    #[test]
    fn what_does_not_fit_is_answered_the_safe_way() {
        let mut m = Marks::default();
        for i in 0..MAX_ENTRIES - 1 {
            assert!(m.mark_made(format!("full/{i}").as_bytes()), "{i}");
        }
        assert_eq!(m.len(), MAX_ENTRIES);
        // Not made: the directory is not the command's own.
        assert!(!m.mark_made(b"other/new"));
        assert!(!m.made(b"other/new"));
        // Vacated: on the nearest entry on its way, releasing what was below it.
        assert!(!m.mark_vacated(b"full/x/y"));
        assert!(m.emptied(b"full/x/y") && m.emptied(b"full/0"));
        assert!(!m.made(b"full/0"));
        assert_eq!(m.len(), 1);
        assert!(!m.emptied(b"other"));
        let mut fitted = 0;
        while m.mark_made(format!("o/{fitted}").as_bytes()) {
            fitted += 1;
        }
        assert_eq!(fitted, MAX_ENTRIES - 2);
        // With no entry on its way, the root.
        assert!(!m.mark_vacated(b"elsewhere"));
        assert!(m.emptied(b"elsewhere") && m.emptied(b"anything") && m.emptied(b""));
        assert_eq!((m.len(), m.name_bytes), (0, 0));
    }

    #[test]
    fn names_past_the_byte_budget_do_not_fit() {
        let mut m = Marks::default();
        let name = "n".repeat(250);
        let fitted = (0..MAX_NAME_BYTES / 250 + 10)
            .filter(|i| m.mark_made(format!("{i:06}{name}").as_bytes()))
            .count();
        assert_eq!(fitted, MAX_NAME_BYTES / 256);
        assert!(m.name_bytes <= MAX_NAME_BYTES);
    }
}
