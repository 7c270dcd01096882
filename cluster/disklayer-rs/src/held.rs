//! The held pages of one file: the data written to it since its last fsync, kept in memory over its
//! backing file until an fsync writes it through or a loss drops it.
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// The unit the data is held in: a write to part of a page holds the whole page.
pub const PAGE: u64 = 4096;

/// What one file holds over its backing file.
#[derive(Default)]
pub struct HeldPages {
    // page index -> the page's current content (PAGE bytes), what the backing file lacks
    pages: BTreeMap<u64, Vec<u8>>,
    // the file's size as its writers see it, while held writes extend it
    size: Option<u64>,
    // bytes written since the last fsync (what a loss reports)
    written: u64,
    file: Option<Arc<File>>,
}

impl HeldPages {
    /// Holds writes over `file`, which is opened for reading and writing.
    pub fn over(file: File) -> Self {
        HeldPages {
            file: Some(Arc::new(file)),
            ..Default::default()
        }
    }

    pub fn file(&self) -> Option<&File> {
        self.file.as_deref()
    }

    /// Gives the pages their backing file, unless they have one already.
    pub fn attach(&mut self, file: File) {
        if self.file.is_none() {
            self.file = Some(Arc::new(file));
        }
    }

    /// The size the file's writers see while held writes extend it (None: the backing file's).
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Bytes written since the last fsync, counted as written (an overwrite counts again).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Whether anything is held that the backing file lacks.
    pub fn is_dirty(&self) -> bool {
        !self.pages.is_empty() || self.size.is_some()
    }

    /// Drops everything held, as a power cut would; answers whether anything was.
    pub fn lose(&mut self) -> bool {
        let dirty = self.is_dirty();
        self.pages.clear();
        self.size = None;
        self.written = 0;
        dirty
    }

    /// Forgets the held pages of a file just opened with O_TRUNC; the count of bytes written stays.
    pub fn discard_pages(&mut self) {
        self.pages.clear();
        self.size = None;
    }

    /// Writes the held pages to the backing file (no fsync); the held data is then gone from memory.
    pub fn write_through(&mut self) -> io::Result<()> {
        if !self.is_dirty() {
            return Ok(());
        }
        let f = self
            .file
            .as_ref()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
        let size = self.size.unwrap_or(f.metadata()?.len());
        for (page, data) in &self.pages {
            let off = page * PAGE;
            if off >= size {
                continue;
            }
            let len = (size - off).min(PAGE) as usize;
            f.write_all_at(&data[..len], off)?;
        }
        if f.metadata()?.len() < size {
            f.set_len(size)?;
        }
        self.pages.clear();
        self.size = None;
        self.written = 0;
        Ok(())
    }

    /// An fsync: writes the held pages through, then fdatasyncs the backing file if anything was held.
    pub fn sync(&mut self) -> io::Result<()> {
        let dirty = self.is_dirty();
        self.write_through()?;
        if dirty && let Some(f) = &self.file {
            f.sync_data()?;
        }
        Ok(())
    }

    /// Before a truncate: what is held is written through, so a truncate makes what came before it durable.
    pub fn before_truncate(&mut self) -> io::Result<()> {
        if self.file.is_some() {
            self.write_through()?;
        }
        Ok(())
    }

    /// The size writers see: the held size, or the backing file's (0 without one).
    fn current_size(&self) -> io::Result<u64> {
        Ok(match (&self.size, &self.file) {
            (Some(s), _) => *s,
            (None, Some(f)) => f.metadata()?.len(),
            (None, None) => 0,
        })
    }

    /// The page as the file's writers see it: held, or read from the backing file (zeros past its end).
    fn page(&self, page: u64) -> io::Result<Vec<u8>> {
        if let Some(p) = self.pages.get(&page) {
            return Ok(p.clone());
        }
        let mut buf = vec![0u8; PAGE as usize];
        if let Some(f) = &self.file {
            let mut done = 0;
            while done < buf.len() {
                let n = f.read_at(&mut buf[done..], page * PAGE + done as u64)?;
                if n == 0 {
                    break;
                }
                done += n;
            }
        }
        Ok(buf)
    }

    /// Holds `data` at `off`: a partial page is filled from what the writers saw before.
    pub fn write(&mut self, off: u64, data: &[u8]) -> io::Result<()> {
        let before = self.current_size()?;
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let page = pos / PAGE;
            let in_page = (pos % PAGE) as usize;
            let n = ((PAGE as usize) - in_page).min((end - pos) as usize);
            let mut buf = if n == PAGE as usize {
                vec![0u8; PAGE as usize]
            } else {
                self.page(page)?
            };
            let src = (pos - off) as usize;
            buf[in_page..in_page + n].copy_from_slice(&data[src..src + n]);
            self.pages.insert(page, buf);
            pos += n as u64;
        }
        self.size = Some(before.max(end));
        self.written += data.len() as u64;
        Ok(())
    }

    /// Up to `len` bytes at `off` as the writers see them: held pages over the backing file.
    pub fn read(&self, off: u64, len: u32) -> io::Result<Vec<u8>> {
        let size = self.current_size()?;
        if off >= size {
            return Ok(vec![]);
        }
        let end = (off + len as u64).min(size);
        if self.pages.range(off / PAGE..=(end - 1) / PAGE).next().is_none() {
            let mut buf = vec![0u8; (end - off) as usize];
            if let Some(f) = &self.file {
                let n = f.read_at(&mut buf, off)?;
                buf.truncate(n);
                buf.resize((end - off) as usize, 0);
            }
            return Ok(buf);
        }
        let mut out = Vec::with_capacity((end - off) as usize);
        let mut pos = off;
        while pos < end {
            let page = self.page(pos / PAGE)?;
            let in_page = (pos % PAGE) as usize;
            let n = ((PAGE as usize) - in_page).min((end - pos) as usize);
            out.extend_from_slice(&page[in_page..in_page + n]);
            pos += n as u64;
        }
        Ok(out)
    }
}

/// A truncate reaching the backing file at `path` (after `HeldPages::before_truncate`).
pub fn truncate_backing(path: &Path, len: u64) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::Scratch;

    const P: usize = PAGE as usize;

    /// Bytes that differ from their neighbours, so a misplaced copy shows.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    fn read_all(held: &HeldPages) -> Vec<u8> {
        held.read(0, u32::MAX / 2).unwrap()
    }

    #[test]
    fn a_write_is_read_back_but_stays_off_the_disk() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b"hello world"));
        held.write(6, b"WORLD").unwrap();
        assert_eq!(read_all(&held), b"hello WORLD");
        assert_eq!(s.on_disk("f"), b"hello world");
        assert_eq!(held.size(), Some(11));
        assert_eq!(held.written(), 5);
        assert!(held.is_dirty());
    }

    #[test]
    fn a_partial_page_keeps_the_backing_bytes_around_it() {
        let s = Scratch::new();
        let backing = pattern(2 * P + 100);
        let mut held = HeldPages::over(s.file("f", &backing));
        // six bytes across the first page boundary: both pages are partly written
        held.write(PAGE - 3, b"abcdef").unwrap();
        let mut expected = backing.clone();
        expected[P - 3..P + 3].copy_from_slice(b"abcdef");
        assert_eq!(read_all(&held), expected);
        assert_eq!(held.read(PAGE - 5, 10).unwrap(), &expected[P - 5..P + 5]);
        // the third page is not held: read from the backing file
        assert_eq!(
            held.read(2 * PAGE + 10, 20).unwrap(),
            &backing[2 * P + 10..2 * P + 30]
        );
        assert_eq!(s.on_disk("f"), backing);
        held.sync().unwrap();
        assert_eq!(s.on_disk("f"), expected);
    }

    #[test]
    fn a_later_write_lands_on_the_held_page_not_the_backing_one() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", &[b'.'; 20]));
        held.write(2, b"aaaa").unwrap();
        held.write(4, b"bb").unwrap();
        assert_eq!(read_all(&held), b"..aabb..............");
        assert_eq!(held.written(), 6, "an overwrite counts again");
    }

    #[test]
    fn a_whole_page_write_replaces_the_page() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", &pattern(3 * P)));
        held.write(PAGE, &[7u8; P]).unwrap();
        let mut expected = pattern(3 * P);
        expected[P..2 * P].fill(7);
        assert_eq!(read_all(&held), expected);
    }

    #[test]
    fn a_write_past_the_end_leaves_a_hole_of_zeros() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b"0123456789"));
        held.write(3 * PAGE + 5, b"xyz").unwrap();
        assert_eq!(held.size(), Some(3 * PAGE + 8));
        let mut expected = vec![0u8; 3 * P + 8];
        expected[..10].copy_from_slice(b"0123456789");
        expected[3 * P + 5..].copy_from_slice(b"xyz");
        assert_eq!(read_all(&held), expected);
        // no held page covers this range: zeros past the backing file's end
        assert_eq!(held.read(PAGE, 100).unwrap(), vec![0u8; 100]);
        assert_eq!(s.on_disk("f"), b"0123456789");
        held.sync().unwrap();
        assert_eq!(s.on_disk("f"), expected);
    }

    #[test]
    fn a_read_stops_at_the_size() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b"abc"));
        assert_eq!(held.read(1, 100).unwrap(), b"bc");
        assert!(held.read(3, 10).unwrap().is_empty());
        held.write(3, b"de").unwrap();
        assert_eq!(held.read(2, 100).unwrap(), b"cde");
        assert!(held.read(5, 10).unwrap().is_empty());
    }

    #[test]
    fn fsync_writes_through_up_to_the_size_only() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b""));
        held.write(0, b"0123456789").unwrap();
        held.sync().unwrap();
        // the held page is PAGE bytes; the file is as long as what was written
        assert_eq!(s.on_disk("f"), b"0123456789");
    }

    #[test]
    fn fsync_makes_the_writes_durable() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b"old data"));
        held.write(0, b"new").unwrap();
        held.write(PAGE, b"far").unwrap();
        held.sync().unwrap();
        assert!(!held.is_dirty());
        assert_eq!((held.size(), held.written()), (None, 0));
        let mut expected = b"new data".to_vec();
        expected.resize(P, 0);
        expected.extend_from_slice(b"far");
        assert_eq!(s.on_disk("f"), expected);
        assert!(!held.lose(), "nothing was held after the fsync");
        assert_eq!(read_all(&held), expected);
    }

    #[test]
    fn write_through_without_fsync_reaches_the_backing_file() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b"abc"));
        held.write(1, b"X").unwrap();
        held.write_through().unwrap();
        assert!(!held.is_dirty());
        assert_eq!(held.written(), 0);
        assert_eq!(s.on_disk("f"), b"aXc");
    }

    #[test]
    fn lose_drops_what_was_never_fsynced_and_keeps_what_was() {
        let s = Scratch::new();
        let backing = vec![b'A'; P + 10];
        let mut held = HeldPages::over(s.file("f", &backing));
        held.write(0, b"bbb").unwrap();
        held.sync().unwrap();
        held.write(5, b"ccc").unwrap();
        held.write(2 * PAGE, b"grown").unwrap();
        assert_eq!(held.written(), 8);
        assert!(held.lose());
        let mut durable = backing;
        durable[..3].copy_from_slice(b"bbb");
        assert_eq!(read_all(&held), durable);
        assert_eq!(s.on_disk("f"), durable);
        assert!(!held.is_dirty());
        assert_eq!((held.size(), held.written()), (None, 0));
        assert!(!held.lose(), "a second loss finds nothing");
    }

    #[test]
    fn a_shrinking_truncate_makes_the_held_data_durable_first() {
        let s = Scratch::new();
        let backing = pattern(2 * P);
        let mut held = HeldPages::over(s.file("f", &backing));
        held.write(100, b"held").unwrap();
        held.write(PAGE + 50, b"cut off").unwrap();
        held.before_truncate().unwrap();
        truncate_backing(&s.path("f"), PAGE + 1).unwrap();
        let mut expected = backing[..P + 1].to_vec();
        expected[100..104].copy_from_slice(b"held");
        assert_eq!(read_all(&held), expected);
        assert!(!held.lose(), "the truncate wrote everything through");
        assert_eq!(s.on_disk("f"), expected);
    }

    #[test]
    fn a_growing_truncate_adds_zeros_after_the_held_data() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b"abc"));
        held.write(3, b"de").unwrap();
        held.before_truncate().unwrap();
        truncate_backing(&s.path("f"), 2 * PAGE).unwrap();
        let mut expected = b"abcde".to_vec();
        expected.resize(2 * P, 0);
        assert_eq!(read_all(&held), expected);
        held.lose();
        assert_eq!(read_all(&held), expected);
        assert_eq!(s.on_disk("f"), expected);
        // a write after the truncate is held again
        held.write(PAGE, b"new").unwrap();
        held.lose();
        assert_eq!(read_all(&held), expected);
    }

    #[test]
    fn a_truncate_of_a_file_never_opened_holds_nothing_to_write() {
        let s = Scratch::new();
        s.file("f", b"abcdef");
        HeldPages::default().before_truncate().unwrap();
        truncate_backing(&s.path("f"), 2).unwrap();
        assert_eq!(s.on_disk("f"), b"ab");
    }

    #[test]
    fn held_pages_without_a_backing_file_cannot_be_synced() {
        let mut held = HeldPages::default();
        held.sync().expect("nothing held: nothing to write");
        held.write(0, b"x").unwrap();
        assert_eq!(read_all(&held), b"x");
        assert_eq!(held.sync().unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn discarding_on_o_trunc_keeps_the_count_of_bytes_written() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("f", b""));
        held.write(0, b"abcd").unwrap();
        held.discard_pages();
        assert!(!held.is_dirty());
        assert!(read_all(&held).is_empty());
        assert_eq!(held.written(), 4);
    }

    #[test]
    fn attach_keeps_the_first_backing_file() {
        let s = Scratch::new();
        let mut held = HeldPages::over(s.file("first", b"1"));
        held.attach(s.file("second", b"22"));
        assert_eq!(read_all(&held), b"1");
    }
}
