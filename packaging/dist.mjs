#!/usr/bin/env node
// Makes wakeful's release files from a release build, in one command:
//
//   node packaging/dist.mjs [--target TRIPLE] [--bin PATH] [--host-bin PATH]
//                           [--out DIR] [--notices FILE] [--with-platform TGZ]...
//
// - wakeful-<version>-<target>.tar.gz: the binary, shell completions, man
//   pages, README, the licences and the third-party licence notices;
// - npm/<platform package>-<version>.tgz: the binary as the npm package of
//   its platform (@wakeful/linux-x64-gnu, …);
// - npm/wakeful-<version>.tgz: the package people install (`npm install -g
//   wakeful`, `npx wakeful`, the Claude Code plugin): a launcher, the plugin,
//   and the platform packages as optionalDependencies, pinned with their
//   integrity in npm-shrinkwrap.json;
// - SHA256SUMS of all of them.
//
// Without --bin it builds `cargo build --locked --release -p wakeful-cli`
// (for --target, default this machine's). --with-platform adds platform
// packages built on other machines to the `wakeful` package (a release
// builds each platform where its toolchain is, then makes `wakeful` once
// with all of them). --host-bin: a build of the same version that runs here,
// for a --bin that cannot (a cross build for macOS): the completions, man
// pages and version check come from it, and the binary itself is checked by
// its Mach-O header (cpu, the libraries it loads). The notices come from
// cargo-about (packaging/about.toml) unless --notices names a file. Nothing
// is downloaded. docs/RELEASING.md describes the whole release.

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const { PLATFORMS, PREVIEW_NOTE, glibcAtLeast } = require("./npm/wakeful/lib/platforms.js");
const MARKER = ".wakeful-dist";

function fail(message) {
  process.stderr.write(`dist: ${message}\n`);
  process.exit(1);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 28, ...opts });
  if (r.error) fail(`cannot run ${cmd}: ${r.error.message}`);
  if (r.status !== 0) {
    fail(`${cmd} ${args.join(" ")} exited with ${r.status ?? r.signal}\n${r.stderr ?? ""}`);
  }
  return r.stdout;
}

function parseArgs(argv) {
  const a = { with: [] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${flag} needs a value`);
      return argv[++i];
    };
    if (flag === "--target") a.target = value();
    else if (flag === "--bin") a.bin = path.resolve(value());
    else if (flag === "--host-bin") a.hostBin = path.resolve(value());
    else if (flag === "--out") a.out = path.resolve(value());
    else if (flag === "--notices") a.notices = path.resolve(value());
    else if (flag === "--with-platform") a.with.push(path.resolve(value()));
    else if (flag === "-h" || flag === "--help") {
      process.stdout.write(fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n\n")[0]);
      process.stdout.write("\n");
      process.exit(0);
    } else fail(`unknown argument ${flag} (see --help)`);
  }
  return a;
}

const sha = (algo, data, enc) => createHash(algo).update(data).digest(enc);
const integrity = (file) => `sha512-${sha("sha512", fs.readFileSync(file), "base64")}`;
const writeJson = (file, value) => fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);

function copy(from, to, mode) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
  if (mode !== undefined) fs.chmodSync(to, mode);
}

/** A fresh output directory: made here, or one this script made before. */
function prepareOut(out) {
  if (fs.existsSync(out)) {
    const entries = fs.readdirSync(out);
    if (entries.length > 0 && !entries.includes(MARKER)) {
      fail(`${out} exists and was not made by dist; choose another --out`);
    }
    fs.rmSync(out, { recursive: true, force: true });
  }
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, MARKER), "made by packaging/dist.mjs\n");
}

function sourceDateEpoch() {
  if (process.env.SOURCE_DATE_EPOCH) return process.env.SOURCE_DATE_EPOCH;
  const r = spawnSync("git", ["-C", repo, "log", "-1", "--format=%ct"], { encoding: "utf8" });
  return r.status === 0 && r.stdout.trim() ? r.stdout.trim() : "315532800";
}

function metadata() {
  const meta = JSON.parse(
    run("cargo", ["metadata", "--no-deps", "--format-version", "1", "--locked"], { cwd: repo }),
  );
  const cli = meta.packages.find((p) => p.name === "wakeful-cli");
  if (!cli) fail("no wakeful-cli package in the workspace");
  return cli;
}

function hostTarget() {
  const line = run("rustc", ["-vV"]).split("\n").find((l) => l.startsWith("host: "));
  if (!line) fail("rustc -vV names no host");
  return line.slice("host: ".length).trim();
}

function buildBinary(target, host) {
  const args = ["build", "--locked", "--release", "-p", "wakeful-cli"];
  if (target !== host) args.push("--target", target);
  process.stderr.write(`dist: cargo ${args.join(" ")}\n`);
  run("cargo", args, { cwd: repo, stdio: ["ignore", "inherit", "inherit"] });
  const targetDir = JSON.parse(
    run("cargo", ["metadata", "--no-deps", "--format-version", "1", "--locked"], { cwd: repo }),
  ).target_directory;
  return path.join(targetDir, ...(target !== host ? [target] : []), "release", "wakeful");
}

function notices(args, target, file) {
  if (args.notices) {
    copy(args.notices, file);
    return;
  }
  const have = spawnSync("cargo", ["about", "--version"], { encoding: "utf8" });
  if (have.status !== 0) {
    fail("cargo-about is not installed: `cargo install --locked cargo-about` (or pass --notices FILE)");
  }
  run(
    "cargo",
    [
      "about", "generate", "--locked", "--fail",
      "--manifest-path", path.join(repo, "crates/wakeful-cli/Cargo.toml"),
      "--config", path.join(repo, "packaging/about.toml"),
      "--target", target,
      "--output-file", file,
      path.join(repo, "packaging/about.hbs"),
    ],
    { cwd: repo },
  );
}

const SHELLS = [
  ["bash", "wakeful.bash"],
  ["zsh", "_wakeful"],
  ["fish", "wakeful.fish"],
  ["elvish", "wakeful.elv"],
  ["powershell", "_wakeful.ps1"],
];

/** `runner` writes the completions and man pages: `bin` itself, or the --host-bin. */
function archive(bin, runner, version, target, out, noticesFile, epoch) {
  const name = `wakeful-${version}-${target}`;
  const stage = path.join(out, ".stage");
  const root = path.join(stage, name);
  copy(bin, path.join(root, "wakeful"), 0o755);
  for (const f of ["README.md", "CHANGELOG.md", "LICENSE-MIT", "LICENSE-APACHE"]) {
    copy(path.join(repo, f), path.join(root, f), 0o644);
  }
  copy(noticesFile, path.join(root, "THIRD-PARTY-LICENSES.md"), 0o644);
  fs.mkdirSync(path.join(root, "completions"));
  for (const [shell, file] of SHELLS) {
    fs.writeFileSync(path.join(root, "completions", file), run(runner, ["completions", shell]));
  }
  run(runner, ["man", "--dir", path.join(root, "man", "man1")]);
  const tgz = path.join(out, `${name}.tar.gz`);
  run("sh", [
    "-c",
    'tar --sort=name --mtime="@$1" --owner=0 --group=0 --numeric-owner --mode=u+rw,go+r,go-w ' +
      '-C "$2" -cf - "$3" | gzip -9n > "$4"',
    "sh", epoch, stage, name, tgz,
  ]);
  fs.rmSync(stage, { recursive: true, force: true });
  return tgz;
}

function npmPack(dir, dest) {
  const out = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", dest], { cwd: dir }));
  return path.join(dest, out[0].filename);
}

/** package.json fields every package shares. */
function common(cli) {
  return {
    license: cli.license,
    repository: { type: "git", url: `git+${cli.repository}.git` },
    homepage: `${cli.repository}#readme`,
    bugs: { url: `${cli.repository}/issues` },
  };
}

/** The newest glibc symbol version the binary needs ("2.34"), via objdump. */
function neededGlibc(bin) {
  const r = spawnSync("objdump", ["-T", bin], { encoding: "utf8", maxBuffer: 1 << 28 });
  if (r.error || r.status !== 0) fail(`objdump -T ${bin} failed (binutils): ${r.error?.message ?? r.stderr}`);
  const versions = [...r.stdout.matchAll(/GLIBC_(\d+(?:\.\d+)*)/g)].map((m) => m[1]);
  return versions.reduce((a, b) => (glibcAtLeast(a, b) ? a : b), "0");
}

// Mach-O (docs/PLATFORMS.md, "Linking for macOS"): the header's cpu and
// the load commands that name a library or the oldest macOS.
const MACHO_CPU = { 0x0100000c: "arm64", 0x01000007: "x64" };
const LC_DYLIBS = new Set([0xc, 0x20, 0x80000018, 0x8000001f, 0x80000023]);
const LC_BUILD_VERSION = 0x32;
const LC_VERSION_MIN_MACOSX = 0x24;

/** A 64-bit Mach-O executable's cpu, libraries and oldest macOS, or a failure. */
function machO(bin) {
  const b = fs.readFileSync(bin);
  if (b.length < 32 || b.readUInt32LE(0) !== 0xfeedfacf) fail(`${bin} is not a 64-bit Mach-O file`);
  if (b.readUInt32LE(12) !== 2) fail(`${bin} is a Mach-O file but not an executable`);
  const cpu = MACHO_CPU[b.readUInt32LE(4)] ?? `cpu type 0x${b.readUInt32LE(4).toString(16)}`;
  const ncmds = b.readUInt32LE(16);
  const dylibs = [];
  let minos = null;
  let at = 32;
  for (let i = 0; i < ncmds; i++) {
    if (at + 8 > b.length) fail(`${bin}: load command ${i} runs past the end`);
    const cmd = b.readUInt32LE(at);
    const size = b.readUInt32LE(at + 4);
    if (size < 8 || at + size > b.length) fail(`${bin}: load command ${i} has size ${size}`);
    if (LC_DYLIBS.has(cmd)) {
      const start = at + b.readUInt32LE(at + 8);
      const end = b.indexOf(0, start);
      dylibs.push(b.toString("utf8", start, end < 0 || end > at + size ? at + size : end));
    } else if (cmd === LC_BUILD_VERSION || cmd === LC_VERSION_MIN_MACOSX) {
      const v = b.readUInt32LE(at + (cmd === LC_BUILD_VERSION ? 12 : 8));
      minos = `${v >>> 16}.${(v >>> 8) & 0xff}.${v & 0xff}`;
    }
    at += size;
  }
  return { cpu, dylibs, minos };
}

function platformPackage(bin, version, target, cli, noticesFile, dir) {
  const p = PLATFORMS[target];
  if (!p) {
    fail(`no npm package is defined for ${target}; add it to packaging/npm/wakeful/lib/platforms.js`);
  }
  if (p.glibc) {
    const needed = neededGlibc(bin);
    if (!glibcAtLeast(p.glibc, needed)) {
      fail(`${bin} needs glibc ${needed}, platforms.js promises ${p.glibc}: build on an older system or change it`);
    }
  }
  if (p.dylibs) {
    const m = machO(bin);
    if (m.cpu !== p.cpu) fail(`${bin} is a Mach-O binary for ${m.cpu}, not ${p.cpu} (${target})`);
    const extra = m.dylibs.filter((d) => !p.dylibs.includes(d));
    if (extra.length > 0) {
      fail(`${bin} loads ${extra.join(", ")}, which platforms.js does not allow for ${target}`);
    }
    process.stderr.write(`dist: ${bin}: Mach-O ${m.cpu}, macOS ${m.minos ?? "?"}+, loads ${m.dylibs.join(", ")}\n`);
  }
  const what = `${p.os} ${p.cpu}${p.libc ? ` (${p.libc})` : ""}`;
  const preview = p.preview ? `**Preview**: ${PREVIEW_NOTE}.\n\n` : "";
  copy(bin, path.join(dir, "bin", "wakeful"), 0o755);
  for (const f of ["LICENSE-MIT", "LICENSE-APACHE"]) copy(path.join(repo, f), path.join(dir, f));
  copy(noticesFile, path.join(dir, "THIRD-PARTY-LICENSES.md"));
  fs.writeFileSync(
    path.join(dir, "README.md"),
    `# ${p.pkg}\n\nThe \`wakeful\` binary for ${what}, built for \`${target}\`.\n` +
      "Install the `wakeful` package instead (`npm install -g wakeful`): it depends on this one\n" +
      `where it fits and runs it.\n\n${preview}`.trimEnd() + "\n",
  );
  writeJson(path.join(dir, "package.json"), {
    name: p.pkg,
    version,
    description: p.preview
      ? `Preview: the wakeful binary for ${what}, ${PREVIEW_NOTE}; the wakeful package runs it.`
      : `The wakeful binary for ${what}; the wakeful package runs it.`,
    ...common(cli),
    os: [p.os],
    cpu: [p.cpu],
    ...(p.libc ? { libc: [p.libc] } : {}),
    files: ["bin/wakeful", "THIRD-PARTY-LICENSES.md"],
    preferUnplugged: true,
    publishConfig: { access: "public" },
  });
}

// The plugin's commands run `wakeful` from PATH; in the npm package they run
// the package's own launcher, so that the plugin and the binary are one
// version. Every command must have one of the shapes below: a new shape
// fails here rather than being shipped unchanged.
const OWN = '"${CLAUDE_PLUGIN_ROOT}/bin/wakeful"';
const HOOK = /^command -v wakeful >\/dev\/null 2>&1 \|\| exit 0; exec wakeful (.+)$/;
const MONITOR = /^if command -v wakeful >\/dev\/null 2>&1; then exec wakeful (.+?); fi; echo '.*'$/;
const MISSING =
  "[wakeful] the wakeful plugin cannot run its wakeful binary (npm did not install the package of this platform), " +
  "so events of background monitors cannot reach this session. Reinstall the plugin, or see " +
  "https://github.com/wakeful-dev/wakeful#install.";

function npmPlugin(version, dir) {
  const src = path.join(repo, "integrations/claude-code");
  const read = (f) => JSON.parse(fs.readFileSync(path.join(src, f), "utf8"));
  const manifest = read(".claude-plugin/plugin.json");
  if (manifest.version !== version) {
    fail(`integrations/claude-code/.claude-plugin/plugin.json has version ${manifest.version}, wakeful ${version}`);
  }
  fs.mkdirSync(path.join(dir, ".claude-plugin"), { recursive: true });
  writeJson(path.join(dir, ".claude-plugin/plugin.json"), manifest);

  const hooks = read("hooks/hooks.json");
  for (const groups of Object.values(hooks.hooks)) {
    for (const group of groups) {
      for (const h of group.hooks) {
        const m = HOOK.exec(h.command);
        if (!m) fail(`hooks/hooks.json: a command of an unknown shape: ${h.command}`);
        h.command = `exec ${OWN} ${m[1]}`;
      }
    }
  }
  fs.mkdirSync(path.join(dir, "hooks"));
  writeJson(path.join(dir, "hooks/hooks.json"), hooks);

  const monitors = read("monitors/monitors.json");
  for (const mon of monitors) {
    const m = MONITOR.exec(mon.command);
    if (!m) fail(`monitors/monitors.json: a command of an unknown shape: ${mon.command}`);
    mon.command = `if ${OWN} --version >/dev/null 2>&1; then exec ${OWN} ${m[1]}; fi; echo '${MISSING}'`;
  }
  fs.mkdirSync(path.join(dir, "monitors"));
  writeJson(path.join(dir, "monitors/monitors.json"), monitors);

  const mcp = read(".mcp.json");
  for (const [name, server] of Object.entries(mcp.mcpServers)) {
    if (server.command !== "wakeful") fail(`.mcp.json: server ${name} does not run wakeful`);
    server.command = "${CLAUDE_PLUGIN_ROOT}/bin/wakeful";
  }
  writeJson(path.join(dir, ".mcp.json"), mcp);
  copy(path.join(src, "skills/wakeful/SKILL.md"), path.join(dir, "skills/wakeful/SKILL.md"));
}

/** The name, version, os/cpu/libc and integrity of a platform package tarball. */
function describePlatform(tgz) {
  const manifest = JSON.parse(run("tar", ["-xzOf", tgz, "package/package.json"]));
  return { tgz, manifest, integrity: integrity(tgz) };
}

function mainPackage(version, cli, platforms, dir) {
  const template = path.join(repo, "packaging/npm/wakeful");
  copy(path.join(template, "bin/wakeful"), path.join(dir, "bin/wakeful"), 0o755);
  copy(path.join(template, "lib/platforms.js"), path.join(dir, "lib/platforms.js"));
  copy(path.join(template, "README.md"), path.join(dir, "README.md"));
  for (const f of ["LICENSE-MIT", "LICENSE-APACHE"]) copy(path.join(repo, f), path.join(dir, f));
  npmPlugin(version, dir);

  const optional = {};
  for (const { manifest } of platforms) {
    if (manifest.version !== version) {
      fail(`${manifest.name} is version ${manifest.version}, not ${version}`);
    }
    optional[manifest.name] = version;
  }
  const pkg = {
    name: "wakeful",
    version,
    description:
      "Monitors for every AI coding agent: a daemon owns background watchers of long jobs and wakes the agent with their output (CLI, MCP server, Claude Code plugin).",
    ...common(cli),
    keywords: cli.keywords,
    bin: { wakeful: "bin/wakeful" },
    files: [
      "bin/", "lib/", ".claude-plugin/", "hooks/", "monitors/", ".mcp.json", "skills/",
      "npm-shrinkwrap.json", "LICENSE-MIT", "LICENSE-APACHE",
    ],
    // Where a platform package given here runs (linux, darwin): npm refuses
    // the package elsewhere rather than installing a launcher with no binary.
    os: [...new Set(platforms.flatMap((p) => p.manifest.os))],
    engines: { node: ">=18" },
    optionalDependencies: optional,
  };
  writeJson(path.join(dir, "package.json"), pkg);

  // Pins each platform package to the tarball made above. npm honours a
  // published package's shrinkwrap, and Claude Code installs a plugin's
  // dependencies only from a lockfile (`npm ci --ignore-scripts`).
  const packages = {
    "": {
      name: pkg.name,
      version,
      license: pkg.license,
      os: pkg.os,
      bin: pkg.bin,
      engines: pkg.engines,
      optionalDependencies: optional,
    },
  };
  for (const { manifest, integrity: sri } of platforms) {
    const base = manifest.name.split("/").pop();
    packages[`node_modules/${manifest.name}`] = {
      version,
      resolved: `https://registry.npmjs.org/${manifest.name}/-/${base}-${version}.tgz`,
      integrity: sri,
      cpu: manifest.cpu,
      license: manifest.license,
      ...(manifest.libc ? { libc: manifest.libc } : {}),
      optional: true,
      os: manifest.os,
    };
  }
  writeJson(path.join(dir, "npm-shrinkwrap.json"), {
    name: pkg.name,
    version,
    lockfileVersion: 3,
    requires: true,
    packages,
  });
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const cli = metadata();
  const version = cli.version;
  const host = hostTarget();
  const target = args.target ?? host;
  const out = args.out ?? path.join(repo, "target", "dist");
  const bin = args.bin ?? buildBinary(target, host);
  if (!fs.existsSync(bin)) fail(`${bin} does not exist`);
  const runner = args.hostBin ?? bin;
  if (!fs.existsSync(runner)) fail(`${runner} does not exist`);
  const said = run(runner, ["--version"]).trim();
  if (!said.startsWith(`wakeful ${version}`)) {
    fail(`${runner} says "${said}", not wakeful ${version}: build this checkout first`);
  }
  prepareOut(out);
  const epoch = sourceDateEpoch();
  const work = path.join(out, ".work");
  fs.mkdirSync(work);
  const noticesFile = path.join(work, "THIRD-PARTY-LICENSES.md");
  notices(args, target, noticesFile);

  const made = [archive(bin, runner, version, target, out, noticesFile, epoch)];

  const npmOut = path.join(out, "npm");
  fs.mkdirSync(npmOut);
  const platformDir = path.join(work, "platform");
  platformPackage(bin, version, target, cli, noticesFile, platformDir);
  const own = npmPack(platformDir, npmOut);
  const platforms = [describePlatform(own)];
  for (const tgz of args.with) {
    const p = describePlatform(tgz);
    if (platforms.some((q) => q.manifest.name === p.manifest.name)) {
      fail(`${p.manifest.name} is given twice`);
    }
    copy(tgz, path.join(npmOut, path.basename(tgz)));
    platforms.push(p);
  }
  made.push(...platforms.map((p) => path.join(npmOut, path.basename(p.tgz))));
  const mainDir = path.join(work, "wakeful");
  mainPackage(version, cli, platforms, mainDir);
  made.push(npmPack(mainDir, npmOut));
  fs.rmSync(work, { recursive: true, force: true });

  const sums = made
    .map((f) => `${sha("sha256", fs.readFileSync(f), "hex")}  ${path.relative(out, f)}\n`)
    .join("");
  fs.writeFileSync(path.join(out, "SHA256SUMS"), sums);
  for (const f of [...made, path.join(out, "SHA256SUMS")]) {
    process.stdout.write(`${f}\t${fs.statSync(f).size} bytes\n`);
  }
}

main();
