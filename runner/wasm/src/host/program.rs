//! Where a granted program really is: never inside the run folder, where a
//! plugin writes its files and its commands leave theirs.
//!
//! Comparing paths as text is not enough: `/tmp/../run/...` and
//! `/proc/self/cwd/...` name the run folder without starting with it, and a
//! symbolic link outside can point in. So the program is found the way the
//! command will find it (as given, or on the runner's PATH, which a plugin
//! cannot change) and both its normalised path and its fully resolved one
//! (`canonicalize`, through every link) are compared with the resolved run
//! folder.

use std::path::{Component, Path, PathBuf};

/// `path` with `.` and `..` removed as text (made absolute first).
fn normalised(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut out = PathBuf::from("/");
    for c in absolute.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The file `program` names: a path as given, a bare name on PATH.
fn locate(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(normalised(Path::new(program)));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| normalised(&dir.join(program)))
        .find(|candidate| candidate.is_file())
}

/// Why a program may not run: it is, or could become, a file the run wrote.
#[derive(Debug, thiserror::Error)]
pub enum InsideRunDir {
    #[error("`{}` is inside the run folder, where plugins and their commands write files", .0.display())]
    Inside(PathBuf),
    #[error("`{program}` resolves to `{}`, inside the run folder, where plugins and their commands write files", .real.display())]
    ResolvesInside { program: String, real: PathBuf },
    /// A path that does not resolve now could be made to later.
    #[error("`{program}` cannot be resolved: {source}")]
    Unresolvable {
        program: String,
        source: std::io::Error,
    },
}

/// `Err(why)` when `program` is, or resolves to, a file inside `run_dir`.
pub fn outside_run_dir(program: &str, run_dir: &Path) -> Result<(), InsideRunDir> {
    let Some(found) = locate(program) else {
        // Not on PATH: the command fails as "not installed".
        return Ok(());
    };
    let run_text = normalised(run_dir);
    let run_real = run_dir.canonicalize().unwrap_or_else(|_| run_text.clone());
    let inside = |p: &Path| p.starts_with(&run_text) || p.starts_with(&run_real);
    if inside(&found) {
        return Err(InsideRunDir::Inside(found));
    }
    match found.canonicalize() {
        Ok(real) if inside(&real) => Err(InsideRunDir::ResolvesInside {
            program: program.to_string(),
            real,
        }),
        Ok(_) => Ok(()),
        // A path that does not resolve now could be made to later: refused.
        Err(source) if program.contains('/') => Err(InsideRunDir::Unresolvable {
            program: program.to_string(),
            source,
        }),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_and_links_into_the_run_folder_are_caught() {
        let top =
            std::env::temp_dir().join(format!("pipeline-wasm-program-{}", std::process::id()));
        let run = top.join("run");
        let files = run.join("stages/p/files");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("ceph"), "#!/bin/sh\n").unwrap();
        let inside = files.join("ceph");
        assert!(outside_run_dir(inside.to_str().unwrap(), &run).is_err());
        let dotted = format!("{}/../run/stages/p/files/ceph", run.display());
        assert!(outside_run_dir(&dotted, &run).is_err());
        let via_tmp = format!("/tmp/..{}", inside.display());
        assert!(outside_run_dir(&via_tmp, &run).is_err());
        std::os::unix::fs::symlink(&inside, top.join("ceph")).unwrap();
        assert!(outside_run_dir(top.join("ceph").to_str().unwrap(), &run).is_err());
        assert!(outside_run_dir("/bin/sh", &run).is_ok());
        assert!(outside_run_dir("sh", &run).is_ok());
        assert!(outside_run_dir("/nonexistent/ceph", &run).is_err());
        std::fs::remove_dir_all(&top).unwrap();
    }
}
