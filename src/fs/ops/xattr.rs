//! Extended attributes, on the node's own object.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use crate::fs::Node;
use crate::fs::VeilFs;
use crate::fs::refusal::errno;
use crate::fs::request::Req;
use crate::sys;

impl VeilFs {
    pub(super) fn xattr_target(&self, cx: &Req, ino: u64, write: bool) -> io::Result<Arc<Node>> {
        let node = self.node(ino)?;
        if write {
            self.attributes_writable(cx, &node)?;
        } else {
            self.visible(cx, &node)?;
        }
        if node.fmt == libc::S_IFLNK {
            // `/proc/self/fd/N` of a link would reach its target: not supported.
            return Err(errno(libc::EOPNOTSUPP));
        }
        Ok(node)
    }

    pub fn getxattr(
        &self,
        cx: &Req,
        ino: u64,
        name: &OsStr,
        size: u32,
    ) -> io::Result<(usize, Vec<u8>)> {
        let node = self.xattr_target(cx, ino, false)?;
        let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| errno(libc::EINVAL))?;
        sys::getxattr(self.inodes.fd_of(&node)?.as_fd(), &c, size as usize)
    }

    pub fn listxattr(&self, cx: &Req, ino: u64, size: u32) -> io::Result<(usize, Vec<u8>)> {
        let node = self.xattr_target(cx, ino, false)?;
        sys::listxattr(self.inodes.fd_of(&node)?.as_fd(), size as usize)
    }

    pub fn setxattr(
        &self,
        cx: &Req,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
    ) -> io::Result<()> {
        let node = self.xattr_target(cx, ino, true)?;
        let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| errno(libc::EINVAL))?;
        sys::setxattr(self.inodes.fd_of(&node)?.as_fd(), &c, value, flags)
    }

    pub fn removexattr(&self, cx: &Req, ino: u64, name: &OsStr) -> io::Result<()> {
        let node = self.xattr_target(cx, ino, true)?;
        let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| errno(libc::EINVAL))?;
        sys::removexattr(self.inodes.fd_of(&node)?.as_fd(), &c)
    }
}
