//! The release files, checked the way people get them. `packaging/dist.mjs`
//! makes them once per run of this test binary, from the binary that
//! `WAKEFUL_DIST_BIN` names: `.ci/run` builds the release binary once
//! (`cargo build --locked --release -p wakeful-cli`) and sets it, so nothing
//! here builds it again. Run alone:
//!
//! ```sh
//! cargo build --locked --release -p wakeful-cli
//! WAKEFUL_DIST_BIN=target/release/wakeful cargo test -p wakeful-cli --test dist
//! ```
//!
//! Without `WAKEFUL_DIST_BIN` the tests that need the release files say so
//! and pass, except under CI, where they fail (as with a missing tool:
//! node/npm, cargo-about, man, the MCP Python SDK). The checks of versions and
//! of the declared MSRV need nothing and always run.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::have;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn host_target() -> String {
    let out = Command::new("rustc").arg("-vV").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap()
}

/// The output of one `dist.mjs` run, with a platform package for another
/// cpu given to it (`--with-platform`), which npm must not install here.
struct Dist {
    _dir: tempfile::TempDir,
    out: PathBuf,
    bin: PathBuf,
}

const DECOY: &str = "@wakeful/linux-arm64-gnu";

/// A platform package for aarch64 whose "binary" is a script: on this
/// machine npm has to skip it, and the launcher would never pick it.
fn decoy_package(dir: &Path) -> PathBuf {
    let pkg = dir.join("decoy");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(pkg.join("bin/wakeful"), "#!/bin/sh\necho decoy\n").unwrap();
    let manifest = serde_json::json!({
        "name": DECOY, "version": VERSION, "license": "MIT OR Apache-2.0",
        "os": ["linux"], "cpu": ["arm64"], "libc": ["glibc"], "files": ["bin/wakeful"],
    });
    std::fs::write(pkg.join("package.json"), manifest.to_string()).unwrap();
    let out = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(dir)
        .current_dir(&pkg)
        .output()
        .unwrap();
    assert!(out.status.success(), "npm pack: {out:?}");
    dir.join(String::from_utf8_lossy(&out.stdout).trim())
}

/// `None`: skipped (said why); panics under CI.
fn dist() -> Option<&'static Dist> {
    static DIST: OnceLock<Option<Dist>> = OnceLock::new();
    DIST.get_or_init(|| {
        let Some(bin) = std::env::var_os("WAKEFUL_DIST_BIN").filter(|b| !b.is_empty()) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "WAKEFUL_DIST_BIN is not set in CI: .ci/run builds the release binary and sets it"
            );
            eprintln!(
                "skipped: set WAKEFUL_DIST_BIN to a release build (cargo build --locked --release -p wakeful-cli)"
            );
            return None;
        };
        let bin = std::fs::canonicalize(repo().join(bin)).expect("WAKEFUL_DIST_BIN");
        let tools: [(&str, &str, &[&str]); 3] = [
            ("node (Node.js 18+)", "node", &["--version"]),
            ("npm", "npm", &["--version"]),
            (
                "cargo-about (cargo install --locked cargo-about --features cli)",
                "cargo",
                &["about", "--version"],
            ),
        ];
        for (what, program, args) in tools {
            if !have(what, Command::new(program).args(args)) {
                return None;
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("wkdist")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let out = dir.path().join("dist");
        let decoy = decoy_package(dir.path());
        let run = Command::new("node")
            .arg(repo().join("packaging/dist.mjs"))
            .arg("--bin")
            .arg(&bin)
            .arg("--out")
            .arg(&out)
            .arg("--with-platform")
            .arg(&decoy)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "dist.mjs: {}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        println!("{}", String::from_utf8_lossy(&run.stdout));
        Some(Dist {
            _dir: dir,
            out,
            bin,
        })
    })
    .as_ref()
}

fn sh(dir: &Path, script: &str) -> std::process::Output {
    Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn the_release_archive_unpacks_runs_and_renders_its_man_pages() {
    let Some(dist) = dist() else { return };
    let name = format!("wakeful-{VERSION}-{}", host_target());
    let archive = dist.out.join(format!("{name}.tar.gz"));
    assert!(archive.is_file(), "{} missing", archive.display());

    // SHA256SUMS names every release file, and they match.
    let sums = std::fs::read_to_string(dist.out.join("SHA256SUMS")).unwrap();
    for file in [
        format!("{name}.tar.gz"),
        format!("npm/wakeful-{VERSION}.tgz"),
        format!("npm/wakeful-linux-x64-gnu-{VERSION}.tgz"),
    ] {
        assert!(
            sums.contains(&format!("  {file}\n")),
            "{file} not in\n{sums}"
        );
    }
    let check = sh(&dist.out, "sha256sum --strict -c SHA256SUMS");
    assert!(check.status.success(), "sha256sum -c: {check:?}");

    // One top directory, owned by root, no absolute or parent paths.
    let list = sh(&dist.out, &format!("tar -tvzf {name}.tar.gz"));
    let list = String::from_utf8_lossy(&list.stdout);
    for line in list.lines() {
        assert!(line.contains(" 0/0 "), "{line}");
        let path = line.split_whitespace().last().unwrap();
        assert!(path.starts_with(&format!("{name}/")), "{path}");
    }

    let unpacked = tempfile::tempdir().unwrap();
    let tar = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(tar.success());
    let root = unpacked.path().join(&name);
    let bin = root.join("wakeful");
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        std::fs::read(&dist.bin).unwrap(),
        "the archive's binary is not the release build"
    );
    let version = Command::new(&bin).arg("--version").output().unwrap();
    let said = String::from_utf8_lossy(&version.stdout);
    assert!(said.starts_with(&format!("wakeful {VERSION}")), "{said}");

    for licence in ["LICENSE-MIT", "LICENSE-APACHE"] {
        assert_eq!(
            std::fs::read_to_string(root.join(licence)).unwrap(),
            std::fs::read_to_string(repo().join(licence)).unwrap(),
            "{licence}"
        );
    }
    // The notices: every crate compiled in, with its licence text.
    let notices = std::fs::read_to_string(root.join("THIRD-PARTY-LICENSES.md")).unwrap();
    for needle in [
        "`tokio ",
        "`rusqlite ",
        "`ring ",
        "Apache License",
        "Permission is hereby granted",
    ] {
        assert!(notices.contains(needle), "{needle} not in the notices");
    }
    assert!(
        !notices.contains("`rcgen ") && !notices.contains("`insta "),
        "dev-dependencies in the notices"
    );

    for file in [
        "wakeful.bash",
        "_wakeful",
        "wakeful.fish",
        "wakeful.elv",
        "_wakeful.ps1",
    ] {
        let text = std::fs::read_to_string(root.join("completions").join(file)).unwrap();
        assert!(text.contains("wakeful"), "{file}");
    }
    let bash = Command::new("bash")
        .args(["--norc", "--noprofile", "-c"])
        .arg(format!(
            "source '{}' && complete -p wakeful",
            root.join("completions/wakeful.bash").display()
        ))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&bash.stdout).contains("_wakeful"),
        "{bash:?}"
    );

    if !have("man (man-db)", Command::new("man").arg("--version")) {
        return;
    }
    let man1 = root.join("man/man1");
    let pages = std::fs::read_dir(&man1).unwrap().count();
    assert!(pages > 20, "{pages} man pages");
    for page in ["wakeful.1", "wakeful-watch.1"] {
        let out = Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(man1.join(page))
            .env("MANWIDTH", "100")
            .env("LC_ALL", "C.UTF-8")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let stem = page.trim_end_matches(".1");
        assert!(
            out.status.success() && text.contains("NAME") && text.contains(stem),
            "man -l {page}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn npm_installs_and_runs_wakeful_without_cargo() {
    let Some(dist) = dist() else { return };
    if !have(
        "the MCP Python SDK (pip install mcp==2.3.0)",
        Command::new("python3").args(["-c", "import mcp"]),
    ) {
        return;
    }
    let out =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("npm-e2e-{}", std::process::id()));
    let run = Command::new("python3")
        .arg(repo().join("tests/e2e/npm/run.py"))
        .arg("--dist")
        .arg(&dist.out)
        .args(["--version", VERSION, "--decoy", DECOY])
        .arg("--native")
        .arg(&dist.bin)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for scenario in ["install", "npx", "mcp", "exit-codes", "signals", "plugin"] {
        assert!(
            stdout.contains(&format!("PASS {scenario} ")),
            "{scenario} did not pass:\n{stdout}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_marketplace_and_the_plugin_name_this_version() {
    let plugin = json_file(&repo().join("integrations/claude-code/.claude-plugin/plugin.json"));
    assert_eq!(plugin["version"], VERSION, "the plugin's version");
    let market = json_file(&repo().join(".claude-plugin/marketplace.json"));
    let entry = &market["plugins"][0];
    assert_eq!(entry["name"], "wakeful");
    assert_eq!(
        entry["source"],
        serde_json::json!({"source": "npm", "package": "wakeful", "version": VERSION}),
        "the marketplace installs the npm package of this version"
    );
    assert_eq!(entry["version"], VERSION);
}

/// The declared `rust-version` (1.88) holds for what `--locked` builds:
/// no locked package declares a newer one. (Only this machine's toolchain
/// exists here, so it is checked from the packages' own declarations; the
/// workspace's code is held to it by clippy's `incompatible_msrv` lint.)
///
/// `cargo metadata` reads the manifest of every locked package, for every
/// target, so it downloads the ones this machine's builds never needed
/// (`android_system_properties`, …) from the registry, as README's test
/// command on a fresh machine must allow. Not `--offline`: that passed only
/// where something else had fetched every target's crates first.
#[test]
fn no_locked_dependency_needs_a_newer_rust_than_the_declared_one() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--locked", "--format-version", "1"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata --locked failed (it reads every locked package's manifest, \
         from the registry where this machine has not fetched it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // "1.88" is 1.88.0.
    let parse = |v: &str| -> [u32; 3] {
        let mut n = [0; 3];
        for (slot, part) in n.iter_mut().zip(v.split('.')) {
            *slot = part.parse().unwrap();
        }
        n
    };
    let declared = parse(env!("CARGO_PKG_RUST_VERSION"));
    let newer: Vec<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let rv = p["rust_version"].as_str()?;
            (parse(rv) > declared)
                .then(|| format!("{} {} (rust-version {rv})", p["name"], p["version"]))
        })
        .collect();
    assert!(
        newer.is_empty(),
        "Cargo.lock has packages that need a newer Rust than {}: {newer:?}",
        env!("CARGO_PKG_RUST_VERSION")
    );
}
