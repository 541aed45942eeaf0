//! The paths a workspace's git index lists, read from `.git/index` itself.
//!
//! veilfs never runs git on a workspace: a repository's own configuration can make
//! git run any command (`core.fsmonitor` runs on `git ls-files`), and whatever ran
//! in the workspace may have written that configuration. The index format
//! (`gitformat-index(5)`) is read for versions 2, 3 and 4, with SHA-1 or SHA-256
//! object names; the file is opened without following a link or waiting on it
//! (it must be a regular file of at most [`MAX_INDEX`] bytes). Anything it cannot
//! read gives no paths: what it is for is a warning.
//!
//! Not read: the entries a split index keeps in its shared index file (`link`
//! extension), and the files inside a sparse index's directory entries.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;

/// The largest index read.
pub const MAX_INDEX: u64 = 64 << 20;

/// The paths staged in the repository whose `.git` directory (not a link, not a
/// `.git` file) is at the top of `root`, sorted, each once. Empty when there is
/// none or its index cannot be read.
pub fn tracked_paths(root: &Path) -> Vec<Vec<u8>> {
    match read_index(root) {
        Some(data) => parse(&data).unwrap_or_default(),
        None => Vec::new(),
    }
}

fn read_index(root: &Path) -> Option<Vec<u8>> {
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let root = crate::sys::open_dir_path(root).ok()?;
    let git = crate::sys::openat(root.as_fd(), c".git", flags | libc::O_DIRECTORY, 0).ok()?;
    let index = crate::sys::openat(git.as_fd(), c"index", flags | libc::O_NONBLOCK, 0).ok()?;
    let st = crate::sys::stat(index.as_fd()).ok()?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 > MAX_INDEX {
        return None;
    }
    let mut data = Vec::with_capacity(st.st_size as usize);
    std::fs::File::from(index)
        .take(MAX_INDEX)
        .read_to_end(&mut data)
        .ok()?;
    Some(data)
}

fn be32(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

/// The paths of the index `data`, sorted and each once; `None` when it is not an
/// index this reads.
pub fn parse(data: &[u8]) -> Option<Vec<Vec<u8>>> {
    if data.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(data, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(data, 8)? as usize;
    // The object name's length is not in the index: the one that reads every
    // entry consistently (each name's length as its flags say) is it.
    let mut paths = [20, 32]
        .into_iter()
        .find_map(|hash| entries(data, version, count, hash))?;
    paths.sort();
    paths.dedup();
    Some(paths)
}

/// The `count` entries after the header, read with object names of `hash` bytes.
fn entries(data: &[u8], version: u32, count: usize, hash: usize) -> Option<Vec<Vec<u8>>> {
    // ctime, mtime (seconds, nanoseconds), dev, ino, mode, uid, gid, size: 40 bytes,
    // then the object name and 16 bits of flags.
    const STAT: usize = 40;
    let mut at = 12;
    let mut paths: Vec<Vec<u8>> = Vec::with_capacity(count.min(1 << 20));
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let mode = be32(data, start + 24)?;
        let flags = be16(data, start + STAT + hash)?;
        at = start + STAT + hash + 2;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return None;
            }
            at += 2;
        }
        let path = if version == 4 {
            // The number of bytes to take off the end of the previous path, then
            // the rest of this one.
            let (strip, used) = varint(data.get(at..)?)?;
            at += used;
            let end = at + data.get(at..)?.iter().position(|&b| b == 0)?;
            let keep = previous.len().checked_sub(strip)?;
            let mut p = previous[..keep].to_vec();
            p.extend_from_slice(&data[at..end]);
            at = end + 1;
            p
        } else {
            let end = at + data.get(at..)?.iter().position(|&b| b == 0)?;
            let p = data[at..end].to_vec();
            // Padded with 1 to 8 NULs to a multiple of 8 bytes.
            at = start + ((end - start + 8) & !7);
            if data.get(end..at)?.iter().any(|&b| b != 0) {
                return None;
            }
            p
        };
        let named = usize::from(flags & 0x0fff);
        if path.is_empty() || (named < 0x0fff && named != path.len()) {
            return None;
        }
        previous.clone_from(&path);
        // A sparse index's directory entry stands for the files inside it.
        if mode & libc::S_IFMT != libc::S_IFDIR {
            paths.push(path);
        }
    }
    // Extensions may follow; the checksum ends the file.
    (data.len() >= at + hash).then_some(paths)
}

/// Git's offset varint: 7 bits a byte, most significant first, each continuation
/// adding one before the shift. The value and the bytes it took.
fn varint(d: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut b = *d.first()?;
    let mut v = usize::from(b & 0x7f);
    while b & 0x80 != 0 {
        i += 1;
        b = *d.get(i)?;
        v = v.checked_add(1)?.checked_mul(128)? | usize::from(b & 0x7f);
    }
    Some((v, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_as_git_writes_them() {
        assert_eq!(varint(&[0x00]), Some((0, 1)));
        assert_eq!(varint(&[0x7f]), Some((127, 1)));
        assert_eq!(varint(&[0x80, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x80, 0x7f]), Some((255, 2)));
        assert_eq!(varint(&[0x81, 0x00]), Some((256, 2)));
        assert_eq!(varint(&[0x80]), None);
    }

    #[test]
    fn what_is_not_an_index_gives_nothing() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"DIRC\0\0\0\x05\0\0\0\0"), None);
        assert_eq!(parse(b"XXXX\0\0\0\x02\0\0\0\0"), None);
        // One entry announced, none there.
        assert_eq!(parse(b"DIRC\0\0\0\x02\0\0\0\x01"), None);
        // No entries, and a checksum.
        let mut empty = b"DIRC\0\0\0\x02\0\0\0\0".to_vec();
        empty.extend_from_slice(&[0; 20]);
        assert_eq!(parse(&empty), Some(Vec::new()));
    }
}
