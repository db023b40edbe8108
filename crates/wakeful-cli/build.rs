//! `wakeful --version` carries the git revision when built from a checkout:
//! `WAKEFUL_VERSION` is `0.1.0 (abc1234)` there and `0.1.0` elsewhere (a
//! crate tarball, no git). The script runs again when HEAD moves.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=WAKEFUL_GIT_REV");
    let version = env!("CARGO_PKG_VERSION");
    // A packager may set the revision; else ask git, if this package is in a
    // wakeful checkout: an unpacked crate (cargo install from crates.io) may
    // sit inside another repository, such as a home directory kept in git.
    let in_checkout = || git(&["ls-files", "--full-name", "--", "build.rs"]).is_some();
    let rev = std::env::var("WAKEFUL_GIT_REV")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| {
            in_checkout()
                .then(|| git(&["rev-parse", "--short", "HEAD"]))
                .flatten()
        });
    if rev.is_some() && std::env::var_os("WAKEFUL_GIT_REV").is_none() {
        // Run again when HEAD or the branch it names moves (a worktree has
        // HEAD in its own git dir, the refs in the common one).
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let dir = git(&["rev-parse", "--git-dir"]).map(|d| here.join(d));
        let common = git(&["rev-parse", "--git-common-dir"]).map(|d| here.join(d));
        let head_ref = git(&["symbolic-ref", "-q", "HEAD"]);
        let mut watch = Vec::new();
        if let Some(d) = &dir {
            watch.push(d.join("HEAD"));
        }
        if let Some(c) = common.as_ref().or(dir.as_ref()) {
            if let Some(r) = &head_ref {
                watch.push(c.join(r));
            }
            watch.push(c.join("packed-refs"));
        }
        for p in watch {
            // A path that does not exist would make cargo run this every time.
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    match rev {
        Some(rev) => println!("cargo:rustc-env=WAKEFUL_VERSION={version} ({rev})"),
        None => println!("cargo:rustc-env=WAKEFUL_VERSION={version}"),
    }
}
