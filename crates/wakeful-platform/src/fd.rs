//! Descriptors: opening one again as an open file description of its own.

use std::os::fd::OwnedFd;

/// Descriptor `fd` of this process opened again with `options`: a new open
/// file description of the same file or pipe, so that flags such as
/// `O_NONBLOCK` set on it do not reach the original.
pub fn reopen(fd: i32, options: &std::fs::OpenOptions) -> std::io::Result<OwnedFd> {
    crate::linux::reopen(fd, options)
}
