"use strict";
// The platforms wakeful ships native binaries for, one npm package each
// (an optionalDependency of `wakeful`; npm installs the one whose os, cpu
// and libc match). wakeful is made for Linux (prctl's PR_SET_CHILD_SUBREAPER
// and PR_SET_PDEATHSIG, pidfd_open, inotify, /proc); the macOS builds are
// previews of its portable posix backend, cross-compiled and never run by
// CI (docs/PLATFORMS.md). packaging/dist.mjs reads this table too, so the
// launcher and the packages it looks for cannot drift apart.

const fs = require("fs");
const path = require("path");

/**
 * What a macOS build may load: libSystem, and the two frameworks that
 * async-nats's rustls-native-certs needs for the system's trust store
 * (`[cluster]` TLS; docs/PLATFORMS.md, "Linking for macOS").
 */
const DARWIN_DYLIBS = [
  "/usr/lib/libSystem.B.dylib",
  "/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation",
  "/System/Library/Frameworks/Security.framework/Versions/A/Security",
];

/**
 * Rust target triple → npm package and the npm `os`/`cpu`/`libc` it fits;
 * `glibc`: the oldest glibc the binary runs on (dist.mjs checks the binary's
 * symbol versions against it; the launcher checks the running system).
 * `preview`: built by cross-compilation and never run by CI; the package
 * says so and the launcher says so once ([PREVIEW_NOTE]). `dylibs`: the only
 * libraries a Mach-O binary may load (dist.mjs reads its load commands).
 */
const PLATFORMS = {
  "x86_64-unknown-linux-gnu": { pkg: "@wakeful/linux-x64-gnu", os: "linux", cpu: "x64", libc: "glibc", glibc: "2.34" },
  "aarch64-unknown-linux-gnu": { pkg: "@wakeful/linux-arm64-gnu", os: "linux", cpu: "arm64", libc: "glibc", glibc: "2.34" },
  "x86_64-unknown-linux-musl": { pkg: "@wakeful/linux-x64-musl", os: "linux", cpu: "x64", libc: "musl" },
  "aarch64-unknown-linux-musl": { pkg: "@wakeful/linux-arm64-musl", os: "linux", cpu: "arm64", libc: "musl" },
  "aarch64-apple-darwin": { pkg: "@wakeful/darwin-arm64", os: "darwin", cpu: "arm64", preview: true, dylibs: DARWIN_DYLIBS },
  "x86_64-apple-darwin": { pkg: "@wakeful/darwin-x64", os: "darwin", cpu: "x64", preview: true, dylibs: DARWIN_DYLIBS },
};

/** What a preview package and its launcher say (docs/PLATFORMS.md). */
const PREVIEW_NOTE =
  "built by cross-compilation, not run by our CI; run `wakeful doctor --selftest` first";

let report;
function header() {
  report = report || (process.report && process.report.getReport());
  return (report && report.header) || {};
}

/**
 * The launcher's note for a preview build, on stderr once per version and
 * user, the first time stderr is a terminal (a person reads it; a hook's, an
 * MCP server's or the plugin's `--version 2>/dev/null` probe would use it up
 * unseen): remembered by a file in wakeful's state directory (WAKEFUL_HOME,
 * else $XDG_STATE_HOME/wakeful, else ~/.local/state/wakeful, as wakeful's
 * own). Where that file cannot be written, the note comes every time.
 * Returns whether it was written to `stderr`.
 */
function notePreviewOnce(platform, version, env = process.env, stderr = process.stderr) {
  if (!stderr.isTTY) return false;
  const home = env.WAKEFUL_HOME || null;
  const base = home || (env.XDG_STATE_HOME || (env.HOME ? path.join(env.HOME, ".local", "state") : null));
  const dir = home || (base && path.join(base, "wakeful"));
  const marker = dir && path.join(dir, `npm-preview-noted-${version}`);
  if (marker && fs.existsSync(marker)) return false;
  stderr.write(
    `wakeful: ${platform.pkg} ${version} is a preview: ${PREVIEW_NOTE}. ` +
      "(Said once; https://github.com/wakeful-dev/wakeful/blob/main/docs/PLATFORMS.md)\n",
  );
  if (marker) {
    try {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      fs.writeFileSync(marker, `${PREVIEW_NOTE}\n`);
    } catch {
      // Not remembered: said again next time.
    }
  }
  return true;
}

/** The libc of this Node.js process: "glibc" or "musl" (Linux), else null. */
function currentLibc() {
  if (process.platform !== "linux") return null;
  return header().glibcVersionRuntime ? "glibc" : "musl";
}

/** Whether glibc version `have` ("2.36") is at least `need` ("2.34"). */
function glibcAtLeast(have, need) {
  const [a, b] = [have, need].map((v) => v.split(".").map(Number));
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if ((a[i] || 0) !== (b[i] || 0)) return (a[i] || 0) > (b[i] || 0);
  }
  return true;
}

/** The glibc this process runs on ("2.36"), or null. */
function runtimeGlibc() {
  return header().glibcVersionRuntime || null;
}

/**
 * The packages that can run here, best first: on glibc the glibc build,
 * then the static musl one (which runs there too); on musl only musl.
 */
function candidates(platform = process.platform, arch = process.arch, libc = currentLibc()) {
  const fits = (p, l) => p.os === platform && p.cpu === arch && (p.libc || null) === l;
  const order = libc === "glibc" ? ["glibc", "musl"] : [libc];
  return order.flatMap((l) =>
    Object.entries(PLATFORMS)
      .filter(([, p]) => fits(p, l))
      .map(([target, p]) => ({ target, ...p })),
  );
}

module.exports = {
  PLATFORMS, PREVIEW_NOTE, candidates, currentLibc, glibcAtLeast, notePreviewOnce, runtimeGlibc,
};
