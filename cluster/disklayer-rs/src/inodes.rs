//! The inode table: every path the kernel has looked up, its inode number, and what its file holds.
use crate::held::HeldPages;
use fuser::Errno;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The root directory's inode number (FUSE's).
pub const ROOT: u64 = 1;

/// One inode: where it lives under the backing directory, and the data written to it since its last fsync.
#[derive(Default)]
pub struct Node {
    pub rel: PathBuf,
    pub held: HeldPages,
    // unlinked (or renamed over): its held data can never be read again once its handles close
    pub removed: bool,
}

pub struct Inodes {
    pub nodes: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

impl Default for Inodes {
    /// A table that knows only the root (the backing directory itself).
    fn default() -> Self {
        let mut table = Inodes {
            nodes: HashMap::new(),
            by_path: HashMap::new(),
            next: ROOT,
        };
        table.by_path.insert(PathBuf::new(), ROOT);
        table.nodes.insert(ROOT, Node::default());
        table
    }
}

impl Inodes {
    /// The inode of `rel` (relative to the backing directory), numbered on first sight.
    pub fn ino_for(&mut self, rel: &Path) -> u64 {
        if let Some(i) = self.by_path.get(rel) {
            return *i;
        }
        self.next += 1;
        let ino = self.next;
        self.by_path.insert(rel.to_path_buf(), ino);
        self.nodes.insert(
            ino,
            Node {
                rel: rel.to_path_buf(),
                ..Default::default()
            },
        );
        ino
    }

    pub fn rel(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.nodes.get(&ino).map(|n| n.rel.clone()).ok_or(Errno::ENOENT)
    }

    /// Forgets the path of a removed entry; its node keeps its held data while it is open.
    pub fn drop_path(&mut self, rel: &Path) {
        if let Some(ino) = self.by_path.remove(rel)
            && let Some(n) = self.nodes.get_mut(&ino)
        {
            n.removed = true;
        }
    }

    /// Moves every path at or below `from` to `to` (a rename of a file or of a directory).
    pub fn move_paths(&mut self, from: &Path, to: &Path) {
        self.drop_path(to);
        let moved: Vec<(PathBuf, u64)> = self
            .by_path
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (p, ino) in moved {
            self.by_path.remove(&p);
            let np = match p.strip_prefix(from) {
                Ok(rest) if !rest.as_os_str().is_empty() => to.join(rest),
                _ => to.to_path_buf(),
            };
            self.by_path.insert(np.clone(), ino);
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.rel = np;
            }
        }
    }

    /// The files that hold data now (by path, sorted, the removed left out) and the bytes written to them
    /// since their last fsync.
    pub fn held(&self) -> (Vec<String>, u64) {
        let mut files = vec![];
        let mut bytes = 0;
        for n in self.nodes.values() {
            if !n.removed && n.held.is_dirty() {
                files.push(n.rel.to_string_lossy().into_owned());
                bytes += n.held.written();
            }
        }
        files.sort();
        (files, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::Scratch;

    #[test]
    fn a_path_keeps_its_inode_and_the_root_is_known() {
        let mut table = Inodes::default();
        assert_eq!(table.ino_for(Path::new("")), ROOT);
        let a = table.ino_for(Path::new("a"));
        let b = table.ino_for(Path::new("d/b"));
        assert_ne!(a, b);
        assert!(a > ROOT && b > ROOT);
        assert_eq!(table.ino_for(Path::new("a")), a);
        assert_eq!(table.rel(b).unwrap(), Path::new("d/b"));
        assert_eq!(table.rel(999), Err(Errno::ENOENT));
    }

    #[test]
    fn a_rename_of_a_directory_moves_what_is_below_it() {
        let mut table = Inodes::default();
        let dir = table.ino_for(Path::new("d"));
        let file = table.ino_for(Path::new("d/sub/f"));
        let other = table.ino_for(Path::new("dx"));
        let replaced = table.ino_for(Path::new("e"));
        table.move_paths(Path::new("d"), Path::new("e"));
        assert_eq!(table.rel(dir).unwrap(), Path::new("e"));
        assert_eq!(table.rel(file).unwrap(), Path::new("e/sub/f"));
        assert_eq!(table.ino_for(Path::new("e/sub/f")), file);
        assert_eq!(
            table.rel(other).unwrap(),
            Path::new("dx"),
            "only whole path components move"
        );
        assert!(table.nodes[&replaced].removed, "the rename's target was replaced");
        assert_ne!(table.ino_for(Path::new("d")), dir, "the old path is free again");
    }

    #[test]
    fn held_names_the_files_holding_data_but_not_the_removed_ones() {
        let s = Scratch::new();
        let mut table = Inodes::default();
        for (name, data) in [
            ("b", &b"12345"[..]),
            ("a", b"12"),
            ("gone", b"123"),
            ("clean", b""),
        ] {
            let ino = table.ino_for(Path::new(name));
            let node = table.nodes.get_mut(&ino).unwrap();
            node.held.attach(s.file(name, b""));
            if !data.is_empty() {
                node.held.write(0, data).unwrap();
            }
        }
        table.drop_path(Path::new("gone"));
        assert_eq!(table.held(), (vec!["a".to_string(), "b".to_string()], 7));
    }
}
