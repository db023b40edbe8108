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
    untar(&archive, unpacked.path());
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

/// Unpacks the gzipped tar `archive` into `into`.
fn untar(archive: &Path, into: &Path) {
    let tar = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(tar.success(), "tar -xzf {}", archive.display());
}

/// The JSON file `member` of the gzipped tar `archive`.
fn json_in_tgz(archive: &Path, member: &str) -> serde_json::Value {
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(archive)
        .arg(member)
        .output()
        .unwrap();
    assert!(out.status.success(), "{member} in {}", archive.display());
    serde_json::from_slice(&out.stdout).unwrap()
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

/// What the launcher and a preview package say on macOS (lib/platforms.js).
const PREVIEW_NOTE: &str =
    "built by cross-compilation, not run by our CI; run `wakeful doctor --selftest` first";

/// The launcher's table picks the darwin packages on macOS, and a preview
/// build is announced once per version: the first run whose stderr is a
/// terminal says so and leaves a marker in wakeful's state directory, the
/// next is silent; a run whose stderr is not a terminal neither says nor
/// remembers it.
/// (This machine is Linux: the functions are called with darwin's values.)
#[test]
fn the_launcher_picks_the_macos_preview_and_says_so_once() {
    if !have("node (Node.js 18+)", Command::new("node").arg("--version")) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let script = r#"
        const p = require(process.argv[1]);
        const said = [];
        const stderr = { isTTY: true, write: (s) => said.push(s) };
        const env = { WAKEFUL_HOME: process.argv[2] };
        const arm = p.candidates("darwin", "arm64", null);
        const x64 = p.candidates("darwin", "x64", null);
        const piped = p.notePreviewOnce(arm[0], "9.9.9", env, { write: (s) => said.push(s) });
        const first = p.notePreviewOnce(arm[0], "9.9.9", env, stderr);
        const second = p.notePreviewOnce(arm[0], "9.9.9", env, stderr);
        const next = p.notePreviewOnce(arm[0], "9.9.10", { HOME: process.argv[3] }, stderr);
        console.log(JSON.stringify({ arm, x64, piped, first, second, next, said,
            linux: p.candidates("linux", "x64", "glibc").map((c) => c.pkg) }));
    "#;
    let out = Command::new("node")
        .arg("-e")
        .arg(script)
        .arg(repo().join("packaging/npm/wakeful/lib/platforms.js"))
        .arg(home.path().join("wk"))
        .arg(home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pkgs = |k: &str| -> Vec<(String, bool)> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|c| (c["pkg"].as_str().unwrap().to_string(), c["preview"] == true))
            .collect()
    };
    assert_eq!(pkgs("arm"), [("@wakeful/darwin-arm64".to_string(), true)]);
    assert_eq!(pkgs("x64"), [("@wakeful/darwin-x64".to_string(), true)]);
    assert_eq!(
        v["linux"],
        serde_json::json!(["@wakeful/linux-x64-gnu", "@wakeful/linux-x64-musl"]),
        "Linux picks what it picked before"
    );
    assert_eq!(
        (&v["piped"], &v["first"], &v["second"], &v["next"]),
        (
            &serde_json::json!(false),
            &serde_json::json!(true),
            &serde_json::json!(false),
            &serde_json::json!(true)
        ),
        "said once per version, to a terminal: {v}"
    );
    let said = v["said"].as_array().unwrap();
    assert_eq!(said.len(), 2, "{said:?}");
    for s in said {
        let s = s.as_str().unwrap();
        assert!(
            s.contains("@wakeful/darwin-arm64")
                && s.contains("preview")
                && s.contains(PREVIEW_NOTE),
            "{s}"
        );
    }
    // WAKEFUL_HOME is the state directory; without it ~/.local/state/wakeful.
    assert!(home.path().join("wk/npm-preview-noted-9.9.9").is_file());
    assert!(home
        .path()
        .join(".local/state/wakeful/npm-preview-noted-9.9.10")
        .is_file());
}

/// A 64-bit Mach-O executable's cpu type and the libraries its load
/// commands name (LC_LOAD_DYLIB and its weak, re-export, lazy and upward
/// kinds); panics on anything else.
fn mach_o(bin: &[u8]) -> (u32, Vec<String>) {
    let u32_at = |at: usize| u32::from_le_bytes(bin[at..at + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 0xfeed_facf, "not a 64-bit Mach-O file");
    assert_eq!(u32_at(12), 2, "not MH_EXECUTE");
    let mut dylibs = Vec::new();
    let mut at = 32;
    for _ in 0..u32_at(16) {
        let (cmd, size) = (u32_at(at), u32_at(at + 4) as usize);
        if [0xc, 0x20, 0x8000_0018, 0x8000_001f, 0x8000_0023].contains(&cmd) {
            let name = &bin[at + u32_at(at + 8) as usize..at + size];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            dylibs.push(String::from_utf8(name[..end].to_vec()).unwrap());
        }
        at += size;
    }
    (u32_at(4), dylibs)
}

/// Whether the binary's code signature (LC_CODE_SIGNATURE: an ad-hoc one
/// from the linker) matches its bytes: every page's SHA-256 in the
/// CodeDirectory is that of the page as shipped. macOS on arm64 kills an
/// executable without a signature or whose signature does not match; on
/// x86_64 none is needed (zig's linker writes none there).
fn signature_matches(bin: &[u8]) -> Result<usize, String> {
    let le = |at: usize| u32::from_le_bytes(bin[at..at + 4].try_into().unwrap()) as usize;
    let be = |at: usize| u32::from_be_bytes(bin[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 32;
    let mut signature = None;
    for _ in 0..le(16) {
        if le(at) == 0x1d {
            signature = Some(le(at + 8));
        }
        at += le(at + 4);
    }
    let sig = signature.ok_or("no LC_CODE_SIGNATURE")?;
    if be(sig) != 0xfade_0cc0 {
        return Err(format!("no embedded signature at {sig}"));
    }
    for i in 0..be(sig + 8) {
        let blob = sig + be(sig + 16 + 8 * i);
        if be(blob) != 0xfade_0c02 {
            continue;
        }
        let (hash_at, pages, limit) = (blob + be(blob + 16), be(blob + 28), be(blob + 32));
        let (hash_size, hash_type, page) = (bin[blob + 36], bin[blob + 37], 1 << bin[blob + 39]);
        if (hash_size, hash_type) != (32, 2) {
            return Err(format!(
                "hash type {hash_type}, size {hash_size}: not SHA-256"
            ));
        }
        if limit != sig || pages != limit.div_ceil(page) {
            return Err(format!(
                "{pages} pages up to {limit}, the signature is at {sig}"
            ));
        }
        for k in 0..pages {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(&bin[k * page..((k + 1) * page).min(limit)]);
            if digest[..] != bin[hash_at + 32 * k..hash_at + 32 * (k + 1)] {
                return Err(format!("page {k} does not match its hash"));
            }
        }
        return Ok(pages);
    }
    Err("no CodeDirectory".into())
}

/// The macOS preview builds (docs/PLATFORMS.md, "Linking for macOS"), as
/// `.ci/cross-darwin` left them in the cargo target directory that
/// `WAKEFUL_DIST_DARWIN_DIR` names: `<triple>/release/wakeful` and, made
/// from it by `dist.mjs` with the host build's completions and man pages
/// (`--host-bin`), the archive and npm package in `dist-darwin/<triple>/`.
/// `.ci/run` runs the script after the tests, then this test. Without the
/// variable the test says so and passes (the workspace's test run comes
/// before the cross build). It also makes the `wakeful` package with both
/// darwin packages and checks it.
#[test]
fn the_macos_preview_archives_and_npm_packages_hold_mach_o_binaries() {
    let Some(darwin) = std::env::var_os("WAKEFUL_DIST_DARWIN_DIR").filter(|d| !d.is_empty()) else {
        eprintln!("skipped: WAKEFUL_DIST_DARWIN_DIR is not set (.ci/cross-darwin sets it)");
        return;
    };
    let host = std::env::var_os("WAKEFUL_DIST_BIN")
        .filter(|b| !b.is_empty())
        .expect("WAKEFUL_DIST_BIN: the host's release build writes the completions and man pages");
    let host = std::fs::canonicalize(repo().join(host)).unwrap();
    for (what, program) in [("node (Node.js 18+)", "node"), ("npm", "npm")] {
        if !have(what, Command::new(program).arg("--version")) {
            return;
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("wkdarwin")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let dist = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("node")
            .arg(repo().join("packaging/dist.mjs"))
            .args(args)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "dist.mjs: {said}");
        said
    };
    // A binary that is not Mach-O is refused for a darwin target.
    let refused = Command::new("node")
        .arg(repo().join("packaging/dist.mjs"))
        .args(["--target", "aarch64-apple-darwin", "--bin"])
        .arg(&host)
        .arg("--out")
        .arg(dir.path().join("refused"))
        .arg("--notices")
        .arg(repo().join("LICENSE-MIT"))
        .output()
        .unwrap();
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("not a 64-bit Mach-O file"),
        "{refused:?}"
    );

    let darwin = repo().join(darwin);
    let mut with = Vec::new();
    for (triple, pkg, cpu, cpu_type) in [
        ("aarch64-apple-darwin", "darwin-arm64", "arm64", 0x0100_000c),
        ("x86_64-apple-darwin", "darwin-x64", "x64", 0x0100_0007),
    ] {
        let bin = darwin.join(triple).join("release/wakeful");
        let out = darwin.join("dist-darwin").join(triple);
        let check = sh(&out, "sha256sum --strict -c SHA256SUMS");
        assert!(check.status.success(), "{triple}: sha256sum -c: {check:?}");
        let binary = std::fs::read(&bin).unwrap();
        let (cpu_seen, dylibs) = mach_o(&binary);
        assert_eq!(cpu_seen, cpu_type, "{triple}");
        assert!(
            dylibs.iter().any(|d| d == "/usr/lib/libSystem.B.dylib"),
            "{dylibs:?}"
        );
        assert!(
            dylibs.iter().all(|d| d.starts_with("/usr/lib/")
                || d.starts_with("/System/Library/Frameworks/")),
            "{triple} loads a library macOS does not have: {dylibs:?}"
        );
        match (signature_matches(&binary), cpu) {
            (Ok(pages), _) => println!("{triple}: signature matches its {pages} pages"),
            (Err(e), "x64") if e == "no LC_CODE_SIGNATURE" => println!("{triple}: {e}"),
            (Err(e), _) => panic!("{triple}: the code signature does not hold: {e}"),
        }

        // The archive: the cross build itself, with the host's completions and pages.
        let name = format!("wakeful-{VERSION}-{triple}");
        let unpacked = dir.path().join(format!("{triple}-unpacked"));
        std::fs::create_dir(&unpacked).unwrap();
        untar(&out.join(format!("{name}.tar.gz")), &unpacked);
        let root = unpacked.join(&name);
        assert_eq!(
            std::fs::read(root.join("wakeful")).unwrap(),
            binary,
            "{triple}"
        );
        for f in [
            "completions/_wakeful",
            "man/man1/wakeful.1",
            "THIRD-PARTY-LICENSES.md",
            "README.md",
        ] {
            assert!(root.join(f).is_file(), "{triple}: {f}");
        }
        let zsh = Command::new(&host)
            .args(["completions", "zsh"])
            .output()
            .unwrap();
        assert_eq!(
            std::fs::read(root.join("completions/_wakeful")).unwrap(),
            zsh.stdout,
            "{triple}: the completions are not the host build's"
        );
        // The notices are this target's: the macOS-only crates are in them.
        let notices = std::fs::read_to_string(root.join("THIRD-PARTY-LICENSES.md")).unwrap();
        assert!(notices.contains("`security-framework "), "{triple}");

        // The npm package: darwin, this cpu, no libc, marked preview.
        let tgz = out.join(format!("npm/wakeful-{pkg}-{VERSION}.tgz"));
        let package = dir.path().join(format!("{triple}-npm"));
        std::fs::create_dir(&package).unwrap();
        untar(&tgz, &package);
        let manifest = json_file(&package.join("package/package.json"));
        assert_eq!(manifest["name"], format!("@wakeful/{pkg}"));
        assert_eq!(manifest["os"], serde_json::json!(["darwin"]));
        assert_eq!(manifest["cpu"], serde_json::json!([cpu]));
        assert!(manifest.get("libc").is_none(), "{manifest}");
        let description = manifest["description"].as_str().unwrap();
        assert!(
            description.starts_with("Preview") && description.contains(PREVIEW_NOTE),
            "{description}"
        );
        let readme = std::fs::read_to_string(package.join("package/README.md")).unwrap();
        assert!(
            readme.contains("**Preview**") && readme.contains(PREVIEW_NOTE),
            "{readme}"
        );
        assert_eq!(
            std::fs::read(package.join("package/bin/wakeful")).unwrap(),
            binary
        );
        with.push("--with-platform".into());
        with.push(tgz.into_os_string());
    }

    // The `wakeful` package with the host's platform package and both darwin
    // ones. (Its own archive's notices are not what is checked here: the
    // darwin archive's stand in, sparing a cargo-about run.)
    let all = dir.path().join("all");
    let notices = dir
        .path()
        .join("aarch64-apple-darwin-unpacked")
        .join(format!("wakeful-{VERSION}-aarch64-apple-darwin"))
        .join("THIRD-PARTY-LICENSES.md");
    let mut args: Vec<std::ffi::OsString> = vec![
        "--bin".into(),
        host.clone().into(),
        "--out".into(),
        all.clone().into(),
        "--notices".into(),
        notices.into(),
    ];
    args.extend(with);
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    dist(&args);
    let main_tgz = all.join(format!("npm/wakeful-{VERSION}.tgz"));
    let main = json_in_tgz(&main_tgz, "package/package.json");
    assert_eq!(main["os"], serde_json::json!(["linux", "darwin"]));
    for pkg in [
        "@wakeful/linux-x64-gnu",
        "@wakeful/darwin-arm64",
        "@wakeful/darwin-x64",
    ] {
        assert_eq!(main["optionalDependencies"][pkg], VERSION, "{main}");
    }
    let shrinkwrap = json_in_tgz(&main_tgz, "package/npm-shrinkwrap.json");
    let arm = &shrinkwrap["packages"]["node_modules/@wakeful/darwin-arm64"];
    assert_eq!(arm["os"], serde_json::json!(["darwin"]), "{shrinkwrap}");
    assert_eq!(arm["cpu"], serde_json::json!(["arm64"]));
    assert!(arm.get("libc").is_none());
    let sums = std::fs::read_to_string(all.join("SHA256SUMS")).unwrap();
    assert!(
        sums.contains(&format!("  npm/wakeful-darwin-x64-{VERSION}.tgz\n")),
        "{sums}"
    );
}
