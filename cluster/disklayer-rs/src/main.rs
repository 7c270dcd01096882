//! Faultline's disk layer: a FUSE file system over a backing directory that holds the data written to
//! each file in memory until that file is fsynced (lazyfs semantics; docs/disk.md).
//!
//! Usage: faultline-disk BACKING MOUNTPOINT CONTROL_SOCKET
//!
//! Metadata (create, mkdir, rename, unlink, chmod, chown, truncate) reaches the backing directory at
//! once; only file data is held. A truncate writes the file's held data through first. The control socket
//! takes one command a connection and answers one JSON line:
//!   lose        drop every held byte (what a power loss would lose)
//!   checkpoint  write every held byte through and fdatasync it
//!   stats       what is held now
use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, Session,
    SessionACL, TimeOrNow, WriteFlags,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const PAGE: u64 = 4096;
const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

/// One inode: where it lives under the backing directory, and the data written to it since its last fsync.
#[derive(Default)]
struct Node {
    rel: PathBuf,
    // page index -> the page's current content (PAGE bytes), what the backing file lacks
    held: BTreeMap<u64, Vec<u8>>,
    // the file's size as its writers see it, while held writes extend it
    size: Option<u64>,
    // bytes written since the last fsync (what a loss reports)
    written: u64,
    file: Option<Arc<File>>,
    // unlinked (or renamed over): its held data can never be read again once its handles close
    removed: bool,
}

#[derive(Default)]
struct State {
    nodes: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

struct Layer {
    backing: PathBuf,
    state: Arc<Mutex<State>>,
}

fn err(e: io::Error) -> Errno {
    Errno::from(e)
}

fn to_time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

fn attr_of(ino: u64, md: &fs::Metadata, size: Option<u64>) -> FileAttr {
    let ft = md.file_type();
    let kind = if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    let size = size.unwrap_or(md.size());
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: to_time(md.atime(), md.atime_nsec()),
        mtime: to_time(md.mtime(), md.mtime_nsec()),
        ctime: to_time(md.ctime(), md.ctime_nsec()),
        crtime: to_time(md.ctime(), md.ctime_nsec()),
        kind,
        perm: (md.mode() & 0o7777) as u16,
        nlink: md.nlink() as u32,
        uid: md.uid(),
        gid: md.gid(),
        rdev: md.rdev() as u32,
        blksize: PAGE as u32,
        flags: 0,
    }
}

impl State {
    fn ino_for(&mut self, rel: &Path) -> u64 {
        if let Some(i) = self.by_path.get(rel) {
            return *i;
        }
        self.next += 1;
        let ino = self.next;
        self.by_path.insert(rel.to_path_buf(), ino);
        self.nodes.insert(ino, Node { rel: rel.to_path_buf(), ..Default::default() });
        ino
    }

    fn rel(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.nodes.get(&ino).map(|n| n.rel.clone()).ok_or(Errno::ENOENT)
    }

    /// Forgets the path of a removed entry; its node keeps its held data while it is open.
    fn drop_path(&mut self, rel: &Path) {
        if let Some(ino) = self.by_path.remove(rel) {
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.removed = true;
            }
        }
    }

    /// Moves every path at or below `from` to `to` (a rename of a file or of a directory).
    fn move_paths(&mut self, from: &Path, to: &Path) {
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
}

impl Node {
    /// Writes the held pages to the backing file (no fsync); the held data is then gone from memory.
    fn write_through(&mut self) -> io::Result<()> {
        if self.held.is_empty() && self.size.is_none() {
            return Ok(());
        }
        let f = self.file.as_ref().ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
        let size = self.size.unwrap_or(f.metadata()?.len());
        for (page, data) in &self.held {
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
        self.held.clear();
        self.size = None;
        self.written = 0;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let dirty = !self.held.is_empty() || self.size.is_some();
        self.write_through()?;
        if dirty {
            if let Some(f) = &self.file {
                f.sync_data()?;
            }
        }
        Ok(())
    }

    /// The page as the file's writers see it: held, or read from the backing file (zeros past its end).
    fn page(&self, page: u64) -> io::Result<Vec<u8>> {
        if let Some(p) = self.held.get(&page) {
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

    fn write(&mut self, off: u64, data: &[u8]) -> io::Result<()> {
        let backing_len = match (&self.size, &self.file) {
            (Some(s), _) => *s,
            (None, Some(f)) => f.metadata()?.len(),
            (None, None) => 0,
        };
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let page = pos / PAGE;
            let in_page = (pos % PAGE) as usize;
            let n = ((PAGE as usize) - in_page).min((end - pos) as usize);
            let mut buf = if n == PAGE as usize { vec![0u8; PAGE as usize] } else { self.page(page)? };
            let src = (pos - off) as usize;
            buf[in_page..in_page + n].copy_from_slice(&data[src..src + n]);
            self.held.insert(page, buf);
            pos += n as u64;
        }
        self.size = Some(backing_len.max(end));
        self.written += data.len() as u64;
        Ok(())
    }

    fn read(&self, off: u64, len: u32) -> io::Result<Vec<u8>> {
        let size = match (&self.size, &self.file) {
            (Some(s), _) => *s,
            (None, Some(f)) => f.metadata()?.len(),
            (None, None) => 0,
        };
        if off >= size {
            return Ok(vec![]);
        }
        let end = (off + len as u64).min(size);
        if self.held.range(off / PAGE..=(end - 1) / PAGE).next().is_none() {
            let mut buf = vec![0u8; (end - off) as usize];
            if let Some(f) = &self.file {
                let n = f.read_at(&mut buf, off)?;
                buf.truncate(n.max(0));
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

impl Layer {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn full(&self, rel: &Path) -> PathBuf {
        self.backing.join(rel)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.lock().rel(parent.0)?.join(name))
    }

    fn entry(&self, rel: &Path) -> Result<FileAttr, Errno> {
        let md = fs::symlink_metadata(self.full(rel)).map_err(err)?;
        let mut st = self.lock();
        let ino = st.ino_for(rel);
        let size = st.nodes.get(&ino).and_then(|n| n.size);
        Ok(attr_of(ino, &md, size))
    }

    fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let st = self.lock();
        let node = st.nodes.get(&ino).ok_or(Errno::ENOENT)?;
        let md = match &node.file {
            Some(f) => f.metadata().map_err(err)?,
            None => fs::symlink_metadata(self.full(&node.rel)).map_err(err)?,
        };
        Ok(attr_of(ino, &md, node.size))
    }

    /// Opens the backing file of `ino` for reading and writing once, shared by every handle.
    fn open_backing(&self, ino: u64) -> Result<(), Errno> {
        let mut st = self.lock();
        let node = st.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        if node.file.is_none() {
            let f = OpenOptions::new().read(true).write(true).open(self.backing.join(&node.rel)).map_err(err)?;
            node.file = Some(Arc::new(f));
        }
        Ok(())
    }

    fn own(&self, path: &Path, req: &Request) {
        let _ = std::os::unix::fs::lchown(path, Some(req.uid()), Some(req.gid()));
    }
}

impl Filesystem for Layer {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.child(parent, name).and_then(|rel| self.entry(&rel));
        match r { Ok(a) => reply.entry(&TTL, &a, Generation(0)), Err(e) => reply.error(e) }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) { Ok(a) => reply.attr(&TTL, &a), Err(e) => reply.error(e) }
    }

    fn setattr(
        &self, _req: &Request, ino: INodeNo, mode: Option<u32>, uid: Option<u32>, gid: Option<u32>,
        size: Option<u64>, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>, _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>, _crtime: Option<SystemTime>, _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>, _flags: Option<fuser::BsdFileFlags>, reply: ReplyAttr,
    ) {
        let r = (|| -> Result<FileAttr, Errno> {
            let rel = self.lock().rel(ino.0)?;
            let path = self.full(&rel);
            if let Some(m) = mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(m & 0o7777)).map_err(err)?;
            }
            if uid.is_some() || gid.is_some() {
                std::os::unix::fs::lchown(&path, uid, gid).map_err(err)?;
            }
            if let Some(s) = size {
                // a truncate writes the file's held data through first, then reaches the backing file
                let mut st = self.lock();
                let node = st.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT)?;
                if node.file.is_some() {
                    node.write_through().map_err(err)?;
                }
                drop(st);
                OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(s)).map_err(err)?;
            }
            if atime.is_some() || mtime.is_some() {
                let t = |x: Option<TimeOrNow>| match x {
                    None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
                    Some(TimeOrNow::Now) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
                    Some(TimeOrNow::SpecificTime(s)) => {
                        let d = s.duration_since(UNIX_EPOCH).unwrap_or_default();
                        libc::timespec { tv_sec: d.as_secs() as i64, tv_nsec: d.subsec_nanos() as i64 }
                    }
                };
                let times = [t(atime), t(mtime)];
                let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
                // SAFETY: c is a valid NUL-terminated path and times holds two timespecs
                let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
                if rc != 0 {
                    return Err(err(io::Error::last_os_error()));
                }
            }
            self.attr(ino.0)
        })();
        match r { Ok(a) => reply.attr(&TTL, &a), Err(e) => reply.error(e) }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = self.lock().rel(ino.0).and_then(|rel| fs::read_link(self.full(&rel)).map_err(err));
        match r { Ok(t) => reply.data(t.as_os_str().as_bytes()), Err(e) => reply.error(e) }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let r = self.child(parent, name).and_then(|rel| {
            let path = self.full(&rel);
            fs::DirBuilder::new().mode(mode & !umask & 0o7777).create(&path).map_err(err)?;
            self.own(&path, req);
            self.entry(&rel)
        });
        match r { Ok(a) => reply.entry(&TTL, &a, Generation(0)), Err(e) => reply.error(e) }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let r = self.child(parent, link_name).and_then(|rel| {
            let path = self.full(&rel);
            std::os::unix::fs::symlink(target, &path).map_err(err)?;
            self.own(&path, req);
            self.entry(&rel)
        });
        match r { Ok(a) => reply.entry(&TTL, &a, Generation(0)), Err(e) => reply.error(e) }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|rel| {
            fs::remove_file(self.full(&rel)).map_err(err)?;
            self.lock().drop_path(&rel);
            Ok(())
        });
        match r { Ok(_) => reply.ok(), Err(e) => reply.error(e) }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|rel| {
            fs::remove_dir(self.full(&rel)).map_err(err)?;
            self.lock().drop_path(&rel);
            Ok(())
        });
        match r { Ok(_) => reply.ok(), Err(e) => reply.error(e) }
    }

    fn rename(
        &self, _req: &Request, parent: INodeNo, name: &OsStr, newparent: INodeNo, newname: &OsStr,
        flags: RenameFlags, reply: ReplyEmpty,
    ) {
        let r = (|| -> Result<(), Errno> {
            if flags.bits() != 0 {
                return Err(Errno::EINVAL);
            }
            let from = self.child(parent, name)?;
            let to = self.child(newparent, newname)?;
            fs::rename(self.full(&from), self.full(&to)).map_err(err)?;
            self.lock().move_paths(&from, &to);
            Ok(())
        })();
        match r { Ok(_) => reply.ok(), Err(e) => reply.error(e) }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.open_backing(ino.0) { Ok(_) => reply.opened(FileHandle(ino.0), FopenFlags::empty()), Err(e) => reply.error(e) }
    }

    fn read(
        &self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, size: u32, _flags: OpenFlags,
        _lock: Option<LockOwner>, reply: ReplyData,
    ) {
        let st = self.lock();
        let r = st.nodes.get(&ino.0).ok_or(Errno::ENOENT).and_then(|n| n.read(offset, size).map_err(err));
        match r { Ok(d) => reply.data(&d), Err(e) => reply.error(e) }
    }

    fn write(
        &self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, data: &[u8], _wf: WriteFlags,
        _flags: OpenFlags, _lock: Option<LockOwner>, reply: ReplyWrite,
    ) {
        let mut st = self.lock();
        let r = st.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT).and_then(|n| n.write(offset, data).map_err(err));
        match r { Ok(_) => reply.written(data.len() as u32), Err(e) => reply.error(e) }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _flags: OpenFlags, _lock: Option<LockOwner>,
        _flush: bool, reply: ReplyEmpty,
    ) {
        // the backing file stays open while the node lives: held data may still need it
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let mut st = self.lock();
        let r = st.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT).and_then(|n| n.sync().map_err(err));
        match r { Ok(_) => reply.ok(), Err(e) => reply.error(e) }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let r = (|| -> Result<Vec<(u64, FileType, OsString)>, Errno> {
            let rel = self.lock().rel(ino.0)?;
            let mut out = vec![(ino.0, FileType::Directory, OsString::from(".")), (ROOT, FileType::Directory, OsString::from(".."))];
            let mut names: Vec<(OsString, bool, bool)> = fs::read_dir(self.full(&rel))
                .map_err(err)?
                .filter_map(|e| e.ok())
                .map(|e| {
                    let ft = e.file_type().ok();
                    (e.file_name(), ft.is_some_and(|t| t.is_dir()), ft.is_some_and(|t| t.is_symlink()))
                })
                .collect();
            names.sort();
            let mut st = self.lock();
            for (name, dir, link) in names {
                let child = st.ino_for(&rel.join(&name));
                let kind = if dir { FileType::Directory } else if link { FileType::Symlink } else { FileType::RegularFile };
                out.push((child, kind, name));
            }
            Ok(out)
        })();
        match r {
            Ok(entries) => {
                for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // metadata reaches the backing directory at once: nothing is held for a directory
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let c = std::ffi::CString::new(self.backing.as_os_str().as_bytes()).unwrap_or_default();
        // SAFETY: statvfs fills the zeroed struct for a valid NUL-terminated path
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return reply.error(err(io::Error::last_os_error()));
        }
        reply.statfs(s.f_blocks, s.f_bfree, s.f_bavail, s.f_files, s.f_ffree, s.f_bsize as u32, 255, s.f_frsize as u32);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate,
    ) {
        let r = self.child(parent, name).and_then(|rel| {
            let path = self.full(&rel);
            let excl = flags & libc::O_EXCL != 0;
            let mut o = OpenOptions::new();
            o.read(true).write(true).mode(mode & !umask & 0o7777);
            if excl { o.create_new(true); } else { o.create(true); }
            let f = o.open(&path).map_err(err)?;
            self.own(&path, req);
            let attr = self.entry(&rel)?;
            let mut st = self.lock();
            if let Some(n) = st.nodes.get_mut(&attr.ino.0) {
                if n.file.is_none() {
                    n.file = Some(Arc::new(f));
                }
                if flags & libc::O_TRUNC != 0 {
                    n.held.clear();
                    n.size = None;
                }
            }
            Ok(attr)
        });
        match r { Ok(a) => reply.created(&TTL, &a, Generation(0), FileHandle(a.ino.0), FopenFlags::empty()), Err(e) => reply.error(e) }
    }
}

/// What the control socket answers: files and bytes held (or dropped, or written through).
fn account(st: &State) -> (Vec<String>, u64) {
    let mut files = vec![];
    let mut bytes = 0;
    for n in st.nodes.values() {
        if !n.removed && (!n.held.is_empty() || n.size.is_some()) {
            files.push(n.rel.to_string_lossy().into_owned());
            bytes += n.written;
        }
    }
    files.sort();
    (files, bytes)
}

fn json_answer(files: &[String], bytes: u64) -> String {
    let quoted: Vec<String> = files
        .iter()
        .map(|f| format!("\"{}\"", f.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{{\"ok\": true, \"files\": [{}], \"bytes\": {}}}\n", quoted.join(", "), bytes)
}

fn command(state: &Mutex<State>, notifier: &fuser::Notifier, cmd: &str) -> String {
    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
    let (files, bytes) = account(&st);
    match cmd {
        "stats" => json_answer(&files, bytes),
        "lose" => {
            let mut touched = vec![];
            for (ino, n) in st.nodes.iter_mut() {
                if !n.held.is_empty() || n.size.is_some() {
                    touched.push(*ino);
                }
                n.held.clear();
                n.size = None;
                n.written = 0;
            }
            drop(st);
            for ino in touched {
                // the kernel's page cache may hold what was just dropped
                let _ = notifier.inval_inode(INodeNo(ino), 0, -1);
            }
            json_answer(&files, bytes)
        }
        "checkpoint" => {
            let mut failed = vec![];
            for n in st.nodes.values_mut() {
                if let Err(e) = n.sync() {
                    failed.push(format!("{}: {}", n.rel.display(), e));
                }
            }
            if failed.is_empty() {
                json_answer(&files, bytes)
            } else {
                format!("{{\"ok\": false, \"error\": \"{}\"}}\n", failed.join("; ").replace('"', "'"))
            }
        }
        _ => format!("{{\"ok\": false, \"error\": \"unknown command {:?}\"}}\n", cmd.replace('"', "'")),
    }
}

fn serve_control(listener: UnixListener, state: Arc<Mutex<State>>, notifier: fuser::Notifier) {
    for conn in listener.incoming().flatten() {
        let mut line = String::new();
        let mut reader = BufReader::new(&conn);
        if reader.read_line(&mut line).is_err() {
            continue;
        }
        let answer = command(&state, &notifier, line.trim());
        let _ = (&conn).write_all(answer.as_bytes());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: faultline-disk BACKING MOUNTPOINT CONTROL_SOCKET");
        std::process::exit(2);
    }
    let backing = fs::canonicalize(&args[1]).unwrap_or_else(|e| {
        eprintln!("faultline-disk: backing directory {}: {}", args[1], e);
        std::process::exit(2);
    });
    let mut st = State { next: ROOT, ..Default::default() };
    st.by_path.insert(PathBuf::new(), ROOT);
    st.nodes.insert(ROOT, Node::default());
    let state = Arc::new(Mutex::new(st));
    let mut cfg = Config::default();
    cfg.mount_options = vec![MountOption::FSName("faultline-disk".into()), MountOption::Subtype("faultline-disk".into())];
    cfg.acl = SessionACL::All;
    let layer = Layer { backing, state: state.clone() };
    let session = Session::new(layer, &args[2], &cfg).unwrap_or_else(|e| {
        eprintln!("faultline-disk: mount {}: {}", args[2], e);
        std::process::exit(1);
    });
    let _ = fs::remove_file(&args[3]);
    let listener = UnixListener::bind(&args[3]).unwrap_or_else(|e| {
        eprintln!("faultline-disk: control socket {}: {}", args[3], e);
        std::process::exit(1);
    });
    let notifier = session.notifier();
    std::thread::spawn(move || serve_control(listener, state, notifier));
    if let Err(e) = session.run() {
        eprintln!("faultline-disk: {}", e);
        std::process::exit(1);
    }
}
