//! Faultline's disk layer: a FUSE file system over a backing directory that holds the data written to
//! each file in memory until that file is fsynced (lazyfs semantics; docs/disk.md).
//!
//! Metadata (create, mkdir, rename, unlink, chmod, chown, truncate) reaches the backing directory at
//! once; only file data is held. A truncate writes the file's held data through first.
//!
//! - `held`: one file's held pages (what was written and not fsynced; write, read, fsync, loss);
//! - `inodes`: the inode table, path by path, each node with its held pages;
//! - `filesystem`: the `fuser::Filesystem` over the backing directory;
//! - `control`: the control socket's commands (`lose`, `checkpoint`, `stats`).
pub mod control;
pub mod filesystem;
pub mod held;
pub mod inodes;

#[cfg(test)]
mod scratch;
