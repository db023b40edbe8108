//! What the installers of every agent share: writing files and finding the
//! `wakeful` that an agent's hooks will run.

use std::path::{Path, PathBuf};

use crate::Error;

/// Writes every file under `root` (overwriting), creating directories.
pub fn write_all(root: &Path, files: &[(&str, &str)]) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        std::fs::write(&path, text)
            .map_err(|e| Error::failed(format!("cannot write {}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

/// The `wakeful` that `PATH` finds, if any.
pub fn wakeful_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("wakeful"))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Replaces the file at `target` with `text` atomically (a temporary file
/// beside it, renamed over it, keeping its permissions). When it `existed`,
/// it is first copied to `<name>.wakeful-backup-<UTC time>`, whose path is
/// returned.
pub fn replace_file(target: &Path, text: &str, existed: bool) -> Result<Option<PathBuf>, Error> {
    let fail = |what: String| Error::failed(what);
    let dir = target
        .parent()
        .ok_or_else(|| fail(format!("{} has no folder", target.display())))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("config");
    let mut backup = None;
    if existed {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let copy = dir.join(format!("{name}.wakeful-backup-{stamp}"));
        std::fs::copy(target, &copy).map_err(|e| {
            fail(format!(
                "not changing {}: cannot back it up to {}: {e}",
                target.display(),
                copy.display()
            ))
        })?;
        backup = Some(copy);
    }
    let tmp = dir.join(format!(".{name}.wakeful-{}", std::process::id()));
    let written = std::fs::write(&tmp, text).and_then(|()| {
        if let Ok(meta) = std::fs::metadata(target) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, target)
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(format!("cannot write {}: {e}", target.display())));
    }
    Ok(backup)
}
