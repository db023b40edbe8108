"use strict";
// The platforms wakeful ships native binaries for, one npm package each
// (an optionalDependency of `wakeful`; npm installs the one whose os, cpu
// and libc match). wakeful runs on Linux only: it relies on prctl
// (PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG), pidfd_open, inotify and /proc.
// packaging/dist.mjs reads this table too, so the launcher and the packages
// it looks for cannot drift apart.

/**
 * Rust target triple → npm package and the npm `os`/`cpu`/`libc` it fits;
 * `glibc`: the oldest glibc the binary runs on (dist.mjs checks the binary's
 * symbol versions against it; the launcher checks the running system).
 */
const PLATFORMS = {
  "x86_64-unknown-linux-gnu": { pkg: "@wakeful/linux-x64-gnu", os: "linux", cpu: "x64", libc: "glibc", glibc: "2.34" },
  "aarch64-unknown-linux-gnu": { pkg: "@wakeful/linux-arm64-gnu", os: "linux", cpu: "arm64", libc: "glibc", glibc: "2.34" },
  "x86_64-unknown-linux-musl": { pkg: "@wakeful/linux-x64-musl", os: "linux", cpu: "x64", libc: "musl" },
  "aarch64-unknown-linux-musl": { pkg: "@wakeful/linux-arm64-musl", os: "linux", cpu: "arm64", libc: "musl" },
};

let report;
function header() {
  report = report || (process.report && process.report.getReport());
  return (report && report.header) || {};
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
  const fits = (p, l) => p.os === platform && p.cpu === arch && p.libc === l;
  const order = libc === "glibc" ? ["glibc", "musl"] : [libc];
  return order.flatMap((l) =>
    Object.entries(PLATFORMS)
      .filter(([, p]) => fits(p, l))
      .map(([target, p]) => ({ target, ...p })),
  );
}

module.exports = { PLATFORMS, candidates, currentLibc, glibcAtLeast, runtimeGlibc };
