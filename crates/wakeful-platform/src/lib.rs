//! wakeful's platform layer: every operating-system-specific capability
//! behind one small interface per concern, so that the rest of the
//! workspace names no Linux-only call (docs/PLATFORMS.md).
//!
//! - [`tree`]: the process tree — reading the process table, a process's
//!   children and environment, adopting orphans (subreaper), dying with the
//!   parent, and per-command containers that no process can leave.
//! - [`fd`]: opening a descriptor again as a new open file description.
//!
//! The backend is [`linux`] (`/proc`, `prctl`, cgroup v2). Other systems
//! have none yet: this crate refuses to build there rather than pretend.

#[cfg(not(target_os = "linux"))]
compile_error!("wakeful-platform has only a Linux backend so far (docs/PLATFORMS.md)");

pub mod fd;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod tree;
