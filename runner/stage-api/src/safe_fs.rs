//! Opening files in a folder that something untrusted can also write to (a
//! WASM plugin's files, a stage folder where granted commands ran).
//!
//! Path checks on text are not enough there: a symbolic link (even a
//! dangling one) or a hard link that a command left behind turns a path that
//! looks inside the folder into a file anywhere on the machine, and a FIFO or
//! a device blocks the reader forever. So every open here:
//!
//! - walks the path one component at a time from an open folder (`openat`),
//!   refusing `..` and following no symbolic link at any step (`O_NOFOLLOW`);
//!   holding each folder open leaves no window for a swap between check and
//!   use;
//! - accepts only a regular file with exactly one link (`fstat` on the opened
//!   file, after a no-follow `fstatat` that avoids even opening a FIFO or a
//!   device), so a hard link to a file elsewhere is neither read nor written;
//! - opens with `O_NONBLOCK`, so nothing here can wait on a FIFO's writer;
//! - truncates only after those checks (never `O_TRUNC` at open).

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Why a file was not opened.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("`{0}` is a symbolic link; links are never followed here")]
    Symlink(String),
    #[error(
        "`{name}` has {links} hard links; a file with more than one link may be another name for a file elsewhere and is refused"
    )]
    HardLinked { name: String, links: u64 },
    #[error("`{name}` is a {kind}, not a regular file; only regular files are read or written")]
    NotRegular { name: String, kind: &'static str },
    #[error("`{name}` is more than {limit} bytes, the most read at once")]
    TooLarge { name: String, limit: u64 },
    #[error("`{0}` already exists and is not replaced")]
    Exists(String),
    #[error("`{0}`: only plain names inside the folder (no `..`, no absolute path)")]
    BadPath(String),
    #[error("`{name}`: {source}")]
    Io { name: String, source: io::Error },
}

/// What to do when the file to write already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Replace its contents (it must be a regular file with one link).
    Replace,
    /// Refuse: the file must be new (`O_CREAT|O_EXCL`, which also refuses
    /// any symbolic link in its place, dangling or not).
    Refuse,
}

/// An open folder; every path is resolved beneath it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// For messages only.
    shown: PathBuf,
}

fn cstring(name: &OsStr) -> Result<CString, FsError> {
    CString::new(name.as_bytes()).map_err(|_| FsError::BadPath(name.to_string_lossy().into()))
}

fn last_error(name: &Path) -> FsError {
    FsError::Io {
        name: name.display().to_string(),
        source: io::Error::last_os_error(),
    }
}

fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "regular file",
        libc::S_IFDIR => "folder",
        libc::S_IFLNK => "symbolic link",
        libc::S_IFIFO => "FIFO (named pipe)",
        libc::S_IFSOCK => "socket",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        _ => "special file",
    }
}

/// A regular file with one link, or the refusal.
fn check_regular(st: &libc::stat, shown: &Path) -> Result<(), FsError> {
    let name = shown.display().to_string();
    match st.st_mode & libc::S_IFMT {
        libc::S_IFLNK => Err(FsError::Symlink(name)),
        libc::S_IFREG if st.st_nlink > 1 => Err(FsError::HardLinked {
            name,
            // `nlink_t` is 32 bits on some targets.
            #[allow(clippy::unnecessary_cast)]
            links: st.st_nlink as u64,
        }),
        libc::S_IFREG => Ok(()),
        other => Err(FsError::NotRegular {
            name,
            kind: kind_of(other),
        }),
    }
}

fn fstat(fd: &OwnedFd, shown: &Path) -> Result<libc::stat, FsError> {
    // SAFETY: `st` is plain data fully written by a successful fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(last_error(shown));
    }
    Ok(st)
}

impl Dir {
    /// Opens a folder the runner made (its path is trusted).
    pub fn open(path: &Path) -> Result<Dir, FsError> {
        let c = cstring(path.as_os_str())?;
        // SAFETY: a valid C string; the fd is owned on success.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(last_error(path));
        }
        Ok(Dir {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            shown: path.to_path_buf(),
        })
    }

    fn shown(&self, name: &OsStr) -> PathBuf {
        self.shown.join(name)
    }

    /// `lstat` of `name` in this folder; `None` when it does not exist.
    fn lstat(&self, name: &OsStr) -> Result<Option<libc::stat>, FsError> {
        let c = cstring(name)?;
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and C string; `st` is written on success.
        let r = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r == 0 {
            return Ok(Some(st));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOENT) {
            Ok(None)
        } else {
            Err(FsError::Io {
                name: self.shown(name).display().to_string(),
                source: e,
            })
        }
    }

    /// The folder `name` directly in this one (created first if `create`);
    /// a symbolic link in its place is refused.
    pub fn child(&self, name: &OsStr, create: bool) -> Result<Dir, FsError> {
        let shown = self.shown(name);
        let c = cstring(name)?;
        if create {
            // SAFETY: valid fd and C string.
            let r = unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o755) };
            if r != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                return Err(last_error(&shown));
            }
        }
        // SAFETY: valid fd and C string; the fd is owned on success.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY
                    | libc::O_DIRECTORY
                    | libc::O_NOFOLLOW
                    | libc::O_NONBLOCK
                    | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => FsError::Symlink(shown.display().to_string()),
                Some(libc::ENOTDIR) => match self.lstat(name)? {
                    Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
                        FsError::Symlink(shown.display().to_string())
                    }
                    Some(st) => FsError::NotRegular {
                        name: shown.display().to_string(),
                        kind: kind_of(st.st_mode),
                    },
                    None => FsError::Io {
                        name: shown.display().to_string(),
                        source: e,
                    },
                },
                _ => FsError::Io {
                    name: shown.display().to_string(),
                    source: e,
                },
            });
        }
        Ok(Dir {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            shown,
        })
    }

    /// The folder holding `rel` (relative, plain names only) and the file's
    /// name in it; missing folders are created when `create`.
    pub fn parent_of(&self, rel: &Path, create: bool) -> Result<(Dir, OsString), FsError> {
        let bad = || FsError::BadPath(rel.display().to_string());
        let mut names = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::CurDir => {}
                _ => return Err(bad()),
            }
        }
        let Some(file) = names.pop() else {
            return Err(bad());
        };
        let mut dir = self.child(OsStr::new("."), false)?;
        for name in names {
            dir = dir.child(name, create)?;
        }
        Ok((dir, file.to_os_string()))
    }

    /// Opens `name` (a file directly in this folder) with `flags`, after
    /// refusing a symbolic link or a special file without opening it.
    fn open_file(&self, name: &OsStr, flags: libc::c_int) -> Result<File, FsError> {
        let shown = self.shown(name);
        if let Some(st) = self.lstat(name)? {
            check_regular(&st, &shown)?;
        }
        let c = cstring(name)?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: valid fd and C string; the fd is owned on success.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, 0o644) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => FsError::Symlink(shown.display().to_string()),
                Some(libc::EEXIST) => FsError::Exists(shown.display().to_string()),
                _ => FsError::Io {
                    name: shown.display().to_string(),
                    source: e,
                },
            });
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // The authoritative check: what was actually opened.
        check_regular(&fstat(&fd, &shown)?, &shown)?;
        Ok(File::from(fd))
    }

    /// Reads `name` whole, up to `limit` bytes.
    pub fn read(&self, name: &OsStr, limit: u64) -> Result<Vec<u8>, FsError> {
        let shown = self.shown(name);
        let file = self.open_file(name, libc::O_RDONLY)?;
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|source| FsError::Io {
                name: shown.display().to_string(),
                source,
            })?;
        if bytes.len() as u64 > limit {
            return Err(FsError::TooLarge {
                name: shown.display().to_string(),
                limit,
            });
        }
        Ok(bytes)
    }

    /// Opens `name` for reading (the same checks as [`read`](Self::read)),
    /// for a caller that reads only part of it.
    pub fn open_read(&self, name: &OsStr) -> Result<File, FsError> {
        self.open_file(name, libc::O_RDONLY)
    }

    /// Opens `name` for writing from the start (see [`Existing`]).
    pub fn create(&self, name: &OsStr, existing: Existing) -> Result<File, FsError> {
        let flags = match existing {
            Existing::Replace => libc::O_WRONLY | libc::O_CREAT,
            Existing::Refuse => libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        };
        let file = self.open_file(name, flags)?;
        // Truncated only now that it is known to be this folder's own file.
        file.set_len(0).map_err(|source| FsError::Io {
            name: self.shown(name).display().to_string(),
            source,
        })?;
        Ok(file)
    }

    /// Writes `bytes` as the whole of `name`.
    pub fn write(&self, name: &OsStr, bytes: &[u8], existing: Existing) -> Result<(), FsError> {
        let mut file = self.create(name, existing)?;
        file.write_all(bytes).map_err(|source| FsError::Io {
            name: self.shown(name).display().to_string(),
            source,
        })
    }

    /// Opens `name` for appending (created if missing).
    pub fn append(&self, name: &OsStr) -> Result<File, FsError> {
        self.open_file(name, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND)
    }
}

/// Splits `path` into its (trusted) folder and file name.
fn split(path: &Path) -> Result<(Dir, &OsStr), FsError> {
    let bad = || FsError::BadPath(path.display().to_string());
    let name = path.file_name().ok_or_else(bad)?;
    let parent = path.parent().ok_or_else(bad)?;
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    Ok((Dir::open(parent)?, name))
}

/// [`Dir::create`] for a file in a folder the runner made (a command's
/// output file, a series file): never through a link left in its place.
pub fn create(path: &Path, existing: Existing) -> Result<File, FsError> {
    let (dir, name) = split(path)?;
    dir.create(name, existing)
}

/// [`Dir::write`] for a file in a folder the runner made.
pub fn write(path: &Path, bytes: &[u8], existing: Existing) -> Result<(), FsError> {
    let (dir, name) = split(path)?;
    dir.write(name, bytes, existing)
}

/// [`Dir::read`] for a file in a folder the runner made (a command's output).
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, FsError> {
    let (dir, name) = split(path)?;
    dir.read(name, limit)
}

/// [`Dir::open_read`] for a file in a folder the runner made.
pub fn open_read(path: &Path) -> Result<File, FsError> {
    let (dir, name) = split(path)?;
    dir.open_read(name)
}

/// [`Dir::append`] for a file in a folder the runner made (a log).
pub fn append(path: &Path) -> Result<File, FsError> {
    let (dir, name) = split(path)?;
    dir.append(name)
}

impl From<FsError> for io::Error {
    fn from(e: FsError) -> io::Error {
        match e {
            FsError::Io { source, .. } => source,
            other => io::Error::new(io::ErrorKind::PermissionDenied, other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("pipeline-safe-fs-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("inside")).unwrap();
        dir
    }

    #[test]
    fn links_out_are_refused_and_plain_files_work() {
        let top = temp("links");
        let inside = top.join("inside");
        std::fs::write(top.join("outside.txt"), "secret").unwrap();
        let dir = Dir::open(&inside).unwrap();

        let (d, n) = dir.parent_of(Path::new("a/b/c.txt"), true).unwrap();
        d.write(&n, b"hello", Existing::Replace).unwrap();
        d.write(&n, b"hi", Existing::Replace).unwrap();
        assert_eq!(d.read(&n, 10).unwrap(), b"hi");
        assert!(matches!(d.read(&n, 1), Err(FsError::TooLarge { .. })));

        // A dangling symlink: a write must not create its target.
        symlink(top.join("created-outside"), inside.join("dangling")).unwrap();
        let e = dir
            .write(OsStr::new("dangling"), b"x", Existing::Replace)
            .unwrap_err();
        assert!(matches!(e, FsError::Symlink(_)), "{e}");
        assert!(!top.join("created-outside").exists());
        // Refuse-existing refuses the link too.
        let e = dir
            .write(OsStr::new("dangling"), b"x", Existing::Refuse)
            .unwrap_err();
        assert!(matches!(e, FsError::Symlink(_) | FsError::Exists(_)), "{e}");

        // A symlinked folder on the way.
        symlink(&top, inside.join("up")).unwrap();
        let e = dir
            .parent_of(Path::new("up/outside.txt"), false)
            .unwrap_err();
        assert!(matches!(e, FsError::Symlink(_)), "{e}");
        assert!(dir.parent_of(Path::new("../outside.txt"), false).is_err());
        assert!(dir.parent_of(Path::new("/etc/passwd"), false).is_err());

        // A hard link to a file outside: neither read nor written.
        std::fs::hard_link(top.join("outside.txt"), inside.join("hard")).unwrap();
        let e = dir.read(OsStr::new("hard"), 100).unwrap_err();
        assert!(matches!(e, FsError::HardLinked { links: 2, .. }), "{e}");
        let e = dir
            .write(OsStr::new("hard"), b"x", Existing::Replace)
            .unwrap_err();
        assert!(matches!(e, FsError::HardLinked { .. }), "{e}");
        assert_eq!(std::fs::read(top.join("outside.txt")).unwrap(), b"secret");
        std::fs::remove_dir_all(&top).unwrap();
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let top = temp("fifo");
        let fifo = top.join("inside/pipe");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let dir = Dir::open(&top.join("inside")).unwrap();
        let e = dir.read(OsStr::new("pipe"), 100).unwrap_err();
        assert!(
            matches!(
                e,
                FsError::NotRegular {
                    kind: "FIFO (named pipe)",
                    ..
                }
            ),
            "{e}"
        );
        let e = append(&fifo).unwrap_err();
        assert!(matches!(e, FsError::NotRegular { .. }), "{e}");
        std::fs::remove_dir_all(&top).unwrap();
    }

    #[test]
    fn a_new_file_never_replaces_one() {
        let top = temp("new");
        let path = top.join("inside/evidence.stdout");
        std::fs::write(&path, "evidence").unwrap();
        let e = write(&path, b"forged", Existing::Refuse).unwrap_err();
        assert!(matches!(e, FsError::Exists(_)), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"evidence");
        std::fs::remove_dir_all(&top).unwrap();
    }
}
