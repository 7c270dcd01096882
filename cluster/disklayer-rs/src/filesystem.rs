//! The FUSE file system: every call reaches the backing directory at once, except file data, which the
//! node's held pages keep until an fsync.
use crate::held::{self, PAGE};
use crate::inodes::{Inodes, ROOT};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::ffi::{OsStr, OsString};
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const TTL: Duration = Duration::from_secs(1);

/// The file system over one backing directory; the inode table is shared with the control socket.
pub struct Layer {
    backing: PathBuf,
    state: Arc<Mutex<Inodes>>,
}

/// What a setattr asks to change, in the order it is applied.
struct AttrChange {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
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

/// Sets the access and modification times of `path` itself (not of a symlink's target).
fn set_times(path: &Path, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>) -> Result<(), Errno> {
    let t = |x: Option<TimeOrNow>| match x {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(s)) => {
            let d = s.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: d.subsec_nanos() as i64,
            }
        }
    };
    let times = [t(atime), t(mtime)];
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: c is a valid NUL-terminated path and times holds two timespecs
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(err(io::Error::last_os_error()));
    }
    Ok(())
}

impl Layer {
    pub fn new(backing: PathBuf, state: Arc<Mutex<Inodes>>) -> Self {
        Layer { backing, state }
    }

    fn lock(&self) -> MutexGuard<'_, Inodes> {
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
        let size = st.nodes.get(&ino).and_then(|n| n.held.size());
        Ok(attr_of(ino, &md, size))
    }

    fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let st = self.lock();
        let node = st.nodes.get(&ino).ok_or(Errno::ENOENT)?;
        let md = match node.held.file() {
            Some(f) => f.metadata().map_err(err)?,
            None => fs::symlink_metadata(self.full(&node.rel)).map_err(err)?,
        };
        Ok(attr_of(ino, &md, node.held.size()))
    }

    /// Opens the backing file of `ino` for reading and writing once, shared by every handle.
    fn open_backing(&self, ino: u64) -> Result<(), Errno> {
        let mut st = self.lock();
        let node = st.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        if node.held.file().is_none() {
            let path = self.backing.join(&node.rel);
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(err)?;
            node.held.attach(f);
        }
        Ok(())
    }

    fn own(&self, path: &Path, req: &Request) {
        let _ = std::os::unix::fs::lchown(path, Some(req.uid()), Some(req.gid()));
    }

    /// A truncate writes the file's held data through first, then reaches the backing file.
    fn truncate(&self, ino: u64, path: &Path, len: u64) -> Result<(), Errno> {
        let mut st = self.lock();
        let node = st.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        node.held.before_truncate().map_err(err)?;
        drop(st);
        held::truncate_backing(path, len).map_err(err)
    }

    fn set_attr(&self, ino: u64, change: AttrChange) -> Result<FileAttr, Errno> {
        let rel = self.lock().rel(ino)?;
        let path = self.full(&rel);
        if let Some(m) = change.mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(m & 0o7777)).map_err(err)?;
        }
        if change.uid.is_some() || change.gid.is_some() {
            std::os::unix::fs::lchown(&path, change.uid, change.gid).map_err(err)?;
        }
        if let Some(s) = change.size {
            self.truncate(ino, &path, s)?;
        }
        if change.atime.is_some() || change.mtime.is_some() {
            set_times(&path, change.atime, change.mtime)?;
        }
        self.attr(ino)
    }

    fn list_dir(&self, ino: u64) -> Result<Vec<(u64, FileType, OsString)>, Errno> {
        let rel = self.lock().rel(ino)?;
        let mut out = vec![
            (ino, FileType::Directory, OsString::from(".")),
            (ROOT, FileType::Directory, OsString::from("..")),
        ];
        let mut names: Vec<(OsString, bool, bool)> = fs::read_dir(self.full(&rel))
            .map_err(err)?
            .filter_map(|e| e.ok())
            .map(|e| {
                let ft = e.file_type().ok();
                (
                    e.file_name(),
                    ft.is_some_and(|t| t.is_dir()),
                    ft.is_some_and(|t| t.is_symlink()),
                )
            })
            .collect();
        names.sort();
        let mut st = self.lock();
        for (name, dir, link) in names {
            let child = st.ino_for(&rel.join(&name));
            let kind = if dir {
                FileType::Directory
            } else if link {
                FileType::Symlink
            } else {
                FileType::RegularFile
            };
            out.push((child, kind, name));
        }
        Ok(out)
    }

    fn create_file(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Result<FileAttr, Errno> {
        let rel = self.child(parent, name)?;
        let path = self.full(&rel);
        let mut o = OpenOptions::new();
        o.read(true).write(true).mode(mode & !umask & 0o7777);
        if flags & libc::O_EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
        let f = o.open(&path).map_err(err)?;
        self.own(&path, req);
        let attr = self.entry(&rel)?;
        let mut st = self.lock();
        if let Some(n) = st.nodes.get_mut(&attr.ino.0) {
            n.held.attach(f);
            if flags & libc::O_TRUNC != 0 {
                n.held.discard_pages();
            }
        }
        Ok(attr)
    }
}

impl Filesystem for Layer {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name).and_then(|rel| self.entry(&rel)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = AttrChange {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.set_attr(ino.0, change) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .lock()
            .rel(ino.0)
            .and_then(|rel| fs::read_link(self.full(&rel)).map_err(err))
        {
            Ok(t) => reply.data(t.as_os_str().as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let r = self.child(parent, name).and_then(|rel| {
            let path = self.full(&rel);
            fs::DirBuilder::new()
                .mode(mode & !umask & 0o7777)
                .create(&path)
                .map_err(err)?;
            self.own(&path, req);
            self.entry(&rel)
        });
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let r = self.child(parent, link_name).and_then(|rel| {
            let path = self.full(&rel);
            std::os::unix::fs::symlink(target, &path).map_err(err)?;
            self.own(&path, req);
            self.entry(&rel)
        });
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|rel| {
            fs::remove_file(self.full(&rel)).map_err(err)?;
            self.lock().drop_path(&rel);
            Ok(())
        });
        match r {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|rel| {
            fs::remove_dir(self.full(&rel)).map_err(err)?;
            self.lock().drop_path(&rel);
            Ok(())
        });
        match r {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
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
        match r {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.open_backing(ino.0) {
            Ok(_) => reply.opened(FileHandle(ino.0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let st = self.lock();
        match st
            .nodes
            .get(&ino.0)
            .ok_or(Errno::ENOENT)
            .and_then(|n| n.held.read(offset, size).map_err(err))
        {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut st = self.lock();
        let node = st.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT);
        match node.and_then(|n| n.held.write(offset, data).map_err(err)) {
            Ok(_) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // the backing file stays open while the node lives: held data may still need it
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let mut st = self.lock();
        match st
            .nodes
            .get_mut(&ino.0)
            .ok_or(Errno::ENOENT)
            .and_then(|n| n.held.sync().map_err(err))
        {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        match self.list_dir(ino.0) {
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
        reply.statfs(
            s.f_blocks,
            s.f_bfree,
            s.f_bavail,
            s.f_files,
            s.f_ffree,
            s.f_bsize as u32,
            255,
            s.f_frsize as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.create_file(req, parent, name, mode, umask, flags) {
            Ok(a) => reply.created(&TTL, &a, Generation(0), FileHandle(a.ino.0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }
}
