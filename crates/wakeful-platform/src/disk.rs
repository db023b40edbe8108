//! A filesystem's space.

use std::path::Path;

/// `statvfs(2)` of the filesystem holding `path`: (bytes free to
/// unprivileged users, the filesystem's size). POSIX: the same call on
/// every backend.
// The field types differ between systems (u32 block counts on macOS).
#[allow(clippy::useless_conversion)]
pub fn space(path: &Path) -> std::io::Result<(u64, u64)> {
    let st = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
    let frag = u64::from(st.fragment_size()).max(1);
    Ok((
        u64::from(st.blocks_available()).saturating_mul(frag),
        u64::from(st.blocks()).saturating_mul(frag),
    ))
}
