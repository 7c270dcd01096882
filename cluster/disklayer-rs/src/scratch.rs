//! Scratch files for the unit tests: a directory of its own per test, removed when dropped.
use std::fs::{self, File, OpenOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new() -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("faultline-disk-test-{}-{}", std::process::id(), n));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A backing file holding `content`, opened for reading and writing as the layer opens it.
    pub fn file(&self, name: &str, content: &[u8]) -> File {
        let path = self.path(name);
        fs::write(&path, content).expect("write scratch file");
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .expect("open scratch file")
    }

    /// What the backing file holds on disk.
    pub fn on_disk(&self, name: &str) -> Vec<u8> {
        fs::read(self.path(name)).expect("read scratch file")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
