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
