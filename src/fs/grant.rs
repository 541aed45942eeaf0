//! What an approval gives: a [`Grant`] of an [`Access`] to a path (see
//! `ask`). A leaf, shared by the questions and the request that holds the grants.

/// What a request does with the content of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Open for reading, list a directory.
    Read,
    /// Open for writing, make, remove or rename a name, change attributes.
    Write,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// Permission to use one path (or a directory and what lies beneath it) of one
/// mount, for an access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The mount's root label (`"workspace"`, `"home"`; empty for `veilfs mount`).
    pub root: &'static str,
    pub path: Vec<u8>,
    /// The grant covers everything beneath `path` too.
    pub beneath: bool,
    pub access: Access,
}

impl Grant {
    pub(crate) fn covers(&self, root: &str, path: &[u8], access: Access) -> bool {
        self.root == root
            && self.access >= access
            && (self.path == path
                || (self.beneath
                    && (self.path.is_empty()
                        || (path.starts_with(&self.path)
                            && path.get(self.path.len()) == Some(&b'/')))))
    }
}
