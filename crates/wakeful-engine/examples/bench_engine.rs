//! Engine benchmark: ingest throughput and line-to-event latency of a
//! [`MonitorRegistry`], each measured side by side with the plain shell
//! alternative, in one process run. Prints a Markdown report to stdout.
//!
//! ```sh
//! cargo run --release -p wakeful-engine --example bench_engine
//! # smaller, e.g. under valgrind --tool=callgrind:
//! cargo run --release -p wakeful-engine --example bench_engine -- --lines 100000 --runs 1 --only ingest
//! ```
//!
//! Options: `--lines N` (ingest input, default 1000000), `--runs N` (ingest
//! repetitions, default 3), `--samples N` (unbatched latency samples, default
//! 500), `--batched-samples N` (default-batching samples, default 40),
//! `--only ingest|latency`.
//!
//! 1. Ingest: a generated file of varied-length lines is copied by
//!    `sh -c 'cat INPUT > OUT'` and, separately, read by a wakeful monitor
//!    whose command is `cat INPUT`, timed from `start` until its `stopped`
//!    event reaches a subscriber. The monitor's output file is checked to be
//!    byte-identical to the input.
//! 2. Latency: one line written to a FIFO that the monitor's `cat` reads,
//!    timed until the `lines` event carrying it reaches a subscriber; and the
//!    same line appended to a file followed by `tail -F FILE | grep
//!    --line-buffered PATTERN`, timed until it is read from grep's stdout.
// A benchmark: a failed step ends the run with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wakeful_core::rate::BURST;
use wakeful_core::{EventBody, EventKind, MonitorSpec, MonitorStopReason};
use wakeful_engine::{MonitorRegistry, RecvError, RegistryConfig, Subscription};

/// Lines per latency monitor (plus one untimed warm-up line): stays below the
/// rate limit's burst, so no sample is ever suppressed or delayed by it.
const SAMPLES_PER_MONITOR: usize = 15;
/// Pause between unbatched latency samples (lets every thread go idle, so a
/// sample includes the wake-ups a real, sporadic line pays).
const UNBATCHED_PAUSE: Duration = Duration::from_millis(2);
/// Pause between default-batching samples: longer than the 200 ms window, so
/// every line is a leading edge.
const BATCHED_PAUSE: Duration = Duration::from_millis(250);
const PATTERN: &str = "bench-lat";

struct Opts {
    lines: usize,
    runs: usize,
    samples: usize,
    batched_samples: usize,
    ingest: bool,
    latency: bool,
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        lines: 1_000_000,
        runs: 3,
        samples: 500,
        batched_samples: 40,
        ingest: true,
        latency: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        let num = |v: String| -> usize { v.parse().unwrap_or_else(|_| panic!("bad number {v}")) };
        match a.as_str() {
            "--lines" => o.lines = num(val()),
            "--runs" => o.runs = num(val()).max(1),
            "--samples" => o.samples = num(val()),
            "--batched-samples" => o.batched_samples = num(val()),
            "--only" => match val().as_str() {
                "ingest" => o.latency = false,
                "latency" => o.ingest = false,
                other => panic!("--only ingest|latency, not {other}"),
            },
            other => panic!("unknown argument {other}; see the file's doc comment"),
        }
    }
    o
}

fn main() {
    let opts = parse_opts();
    let tmp = tempfile::Builder::new()
        .prefix("wakeful-bench-")
        .tempdir()
        .expect("create a temp dir");
    let dir = tmp.path();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let registry = rt.block_on(async {
        MonitorRegistry::new(RegistryConfig {
            output_dir: dir.join("out"),
            ..RegistryConfig::default()
        })
    });

    let total = Instant::now();
    let mut report = String::new();
    report.push_str(&machine_facts());

    if opts.ingest {
        report.push_str(&ingest(&rt, &registry, dir, &opts));
    }
    if opts.latency {
        report.push_str(&latency(&rt, &registry, dir, &opts));
    }
    report.push_str(&format!(
        "\nTotal benchmark wall time: {:.1} s; load average at the end: {}.\n",
        total.elapsed().as_secs_f64(),
        load_average()
    ));
    println!("{report}");
    drop(registry);
    drop(rt);
}

// ---------------------------------------------------------------- machine --

fn sh_out(cmd: &str) -> String {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("({cmd}: {e})"))
}

/// The 1, 5 and 15 minute load averages: anything else running skews
/// latency figures on a small machine.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn machine_facts() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    format!(
        "## Machine\n\n| fact | value |\n|---|---|\n| nproc | {} |\n| kernel (`uname -r`) | {} |\n| CPU | {} |\n| date (UTC) | {} |\n| load average at start | {} |\n| tools | {}; {}; {} |\n",
        sh_out("nproc"),
        sh_out("uname -r"),
        cpu,
        sh_out("date -u '+%Y-%m-%d %H:%M'"),
        load_average(),
        sh_out("cat --version | head -1"),
        sh_out("tail --version | head -1"),
        sh_out("grep --version | head -1"),
    )
}

// ----------------------------------------------------------------- ingest --

/// A deterministic input of `lines` log-like lines of varied length (0 to
/// ~200 bytes, mean ~70), some with `\r\n` and some with multi-byte UTF-8.
fn generate_input(path: &Path, lines: usize) -> u64 {
    const WORDS: &[&str] = &[
        "error",
        "warning:",
        "compiling",
        "wakeful-core",
        "v0.1.0",
        "test",
        "ok",
        "FAILED",
        "src/lib.rs:42:7",
        "unused",
        "variable",
        "`x`",
        "finished",
        "in",
        "0.42s",
        "request",
        "GET",
        "/api/v1/items",
        "200",
        "latency=12ms",
        "naïve",
        "→",
        "déjà-vu",
        "0x7f3a9c",
    ];
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let mut w = std::io::BufWriter::with_capacity(1 << 20, File::create(path).expect("input"));
    let mut total = 0u64;
    let mut line = String::with_capacity(256);
    for i in 0..lines {
        line.clear();
        // Roughly exponential-ish spread: most lines short, some long.
        let target = match rng.u8(..10) {
            0 => 0,
            1..=5 => rng.usize(10..60),
            6..=8 => rng.usize(60..140),
            _ => rng.usize(140..220),
        };
        if target > 0 {
            line.push_str(&format!("{i:07} "));
        }
        while line.len() < target {
            line.push_str(WORDS[rng.usize(..WORDS.len())]);
            line.push(' ');
        }
        if rng.u8(..50) == 0 {
            line.push('\r');
        }
        line.push('\n');
        w.write_all(line.as_bytes()).expect("write input");
        total += line.len() as u64;
    }
    w.flush().expect("flush input");
    total
}

struct IngestRun {
    secs: f64,
    events: u64,
    suppressed_reports: u64,
    suppressed_lines: u64,
    delivered_lines: u64,
}

/// Times `sh -c SCRIPT`, where `{in}` and `{out}` in the script are replaced
/// by the quoted paths.
fn time_sh(script: &str, input: &Path, out: &Path) -> f64 {
    let cmd = script
        .replace("{in}", &format!("'{}'", input.display()))
        .replace("{out}", &format!("'{}'", out.display()));
    let t0 = Instant::now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .status()
        .expect("run sh -c");
    let secs = t0.elapsed().as_secs_f64();
    assert!(status.success(), "`{cmd}` failed: {status}");
    secs
}

async fn time_wakeful(registry: &MonitorRegistry, input: &Path) -> (IngestRun, PathBuf) {
    let mut sub = registry.subscribe();
    let t0 = Instant::now();
    let started = registry
        .start(MonitorSpec::command(
            format!("cat '{}'", input.display()),
            "bench ingest",
        ))
        .await
        .expect("start the ingest monitor");
    let id = started.info.id.clone();
    let mut run = IngestRun {
        secs: 0.0,
        events: 0,
        suppressed_reports: 0,
        suppressed_lines: 0,
        delivered_lines: 0,
    };
    loop {
        let ev = match sub.recv().await {
            Ok(ev) => ev,
            Err(RecvError::Lagged(n)) => panic!("subscriber lagged by {n} events"),
            Err(RecvError::Closed) => panic!("registry closed"),
        };
        if ev.monitor_id != id {
            continue;
        }
        match &ev.body {
            EventBody::MonitorEvent { lines, .. } => {
                run.events += 1;
                run.delivered_lines += lines.len() as u64;
            }
            EventBody::MonitorSuppressed { count, .. } => {
                run.suppressed_reports += 1;
                run.suppressed_lines += count;
            }
            EventBody::MonitorStopped { reason, .. } => {
                run.secs = t0.elapsed().as_secs_f64();
                assert_eq!(
                    *reason,
                    MonitorStopReason::ExitCode { code: 0 },
                    "ingest monitor ended badly"
                );
                break;
            }
            EventBody::MonitorFailed { error, .. } => panic!("ingest monitor failed: {error}"),
            _ => {}
        }
    }
    (run, started.info.output_path)
}

/// The output file must be the input, byte for byte.
fn verify_copy(input: &Path, output: &Path, lines: usize) {
    let a = std::fs::read(input).expect("read input");
    let b = std::fs::read(output).expect("read output");
    let nl = b.iter().filter(|c| **c == b'\n').count();
    assert_eq!(
        a.len(),
        b.len(),
        "output {} has {} bytes, input {}",
        output.display(),
        b.len(),
        a.len()
    );
    assert_eq!(nl, lines, "output has {nl} lines, input {lines}");
    assert!(a == b, "output differs from input");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The contenders of the ingest race.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Contender {
    /// `sh -c 'cat INPUT > OUT'`: what the issue's target compares against.
    CatToFile,
    /// `sh -c 'cat INPUT | cat > OUT'`: the same bytes through a pipe, as any
    /// pipe reader must take them (GNU `cat > file` copies file to file with
    /// `copy_file_range(2)`, inside the kernel).
    CatPipe,
    /// A wakeful monitor running `cat INPUT`.
    Wakeful,
}

const CONTENDERS: [Contender; 3] = [Contender::CatToFile, Contender::CatPipe, Contender::Wakeful];

/// CPU time used so far by this process (all its threads: the engine) and
/// by its waited-for children (`sh`, `cat`).
#[derive(Clone, Copy)]
struct Cpu {
    own: f64,
    children: f64,
}

impl Cpu {
    fn now() -> Cpu {
        let get = |who| {
            // SAFETY: an all-zero rusage is a valid value of this plain C
            // struct, and getrusage only writes into the struct we hand it.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: see above; `ru` outlives the call.
            unsafe { libc::getrusage(who, &mut ru) };
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            tv(ru.ru_utime) + tv(ru.ru_stime)
        };
        Cpu {
            own: get(libc::RUSAGE_SELF),
            children: get(libc::RUSAGE_CHILDREN),
        }
    }

    fn since(self, earlier: Cpu) -> Cpu {
        Cpu {
            own: self.own - earlier.own,
            children: self.children - earlier.children,
        }
    }
}

/// Runs one contender once on `input`; returns wall seconds, CPU time and,
/// for wakeful, its event counts. Verifies the copy and removes it.
fn run_contender(
    rt: &tokio::runtime::Runtime,
    registry: &MonitorRegistry,
    c: Contender,
    input: &Path,
    out: &Path,
    lines: usize,
) -> (f64, Cpu, Option<IngestRun>) {
    // Start every run with no dirty pages left over from the previous one.
    nix::unistd::sync();
    let cpu0 = Cpu::now();
    match c {
        Contender::CatToFile | Contender::CatPipe => {
            let script = if c == Contender::CatToFile {
                "cat {in} > {out}"
            } else {
                "cat {in} | cat > {out}"
            };
            let s = time_sh(script, input, out);
            let cpu = Cpu::now().since(cpu0);
            verify_copy(input, out, lines);
            std::fs::remove_file(out).expect("remove output");
            (s, cpu, None)
        }
        Contender::Wakeful => {
            let (r, out) = rt.block_on(time_wakeful(registry, input));
            let cpu = Cpu::now().since(cpu0);
            verify_copy(input, &out, lines);
            assert_eq!(
                r.delivered_lines + r.suppressed_lines,
                lines as u64,
                "every line is either delivered or counted as suppressed"
            );
            std::fs::remove_file(&out).expect("remove output");
            (r.secs, cpu, Some(r))
        }
    }
}

fn ingest(
    rt: &tokio::runtime::Runtime,
    registry: &MonitorRegistry,
    dir: &Path,
    o: &Opts,
) -> String {
    let input = dir.join("input.log");
    let bytes = generate_input(&input, o.lines);
    let out = dir.join("copy.log");
    // Fixed cost of one run (process start and end): an empty input.
    let empty = dir.join("empty.log");
    File::create(&empty).expect("create empty input");
    let mut fixed = [Vec::new(), Vec::new(), Vec::new()];
    // Untimed warm-up of every contender (page cache, allocator, code).
    for c in CONTENDERS {
        run_contender(rt, registry, c, &input, &out, o.lines);
    }
    let mut secs = [Vec::new(), Vec::new(), Vec::new()];
    let mut cpus: [Vec<Cpu>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut last: Option<IngestRun> = None;
    for run in 0..o.runs {
        // Rotate the order, so no contender always runs first.
        for k in 0..CONTENDERS.len() {
            let ci = (k + run) % CONTENDERS.len();
            let (s, c, r) = run_contender(rt, registry, CONTENDERS[ci], &input, &out, o.lines);
            eprintln!("ingest run {run}: contender {ci}: {s:.3} s");
            secs[ci].push(s);
            cpus[ci].push(c);
            last = r.or(last);
            let (s, _, _) = run_contender(rt, registry, CONTENDERS[ci], &empty, &out, 0);
            fixed[ci].push(s);
        }
    }
    let fmt_runs = |v: &[f64]| {
        v.iter()
            .map(|s| format!("{s:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let med: Vec<f64> = secs.iter().map(|v| median(v.clone())).collect();
    let fixed_ms: Vec<f64> = fixed.iter().map(|v| 1e3 * median(v.clone())).collect();
    let mb = bytes as f64 / 1e6;
    let names = [
        "`sh -c 'cat INPUT > OUT'` (target baseline)",
        "`sh -c 'cat INPUT \\| cat > OUT'` (pipe path, reference)",
        "wakeful monitor `cat INPUT` (start → `stopped` received)",
    ];
    let last = last.expect("at least one run");
    let mut s = format!(
        "\n## Ingest: {} lines, {:.1} MB (MB = 10^6 bytes), median of {} runs\n\n",
        o.lines, mb, o.runs
    );
    s.push_str(
        "| contender | median s | MB/s | lines/s | runs (s) | CPU s: bench process / children | empty input (ms) |\n\
         |---|---:|---:|---:|---|---:|---:|\n",
    );
    for i in 0..CONTENDERS.len() {
        let own = median(cpus[i].iter().map(|c| c.own).collect());
        let children = median(cpus[i].iter().map(|c| c.children).collect());
        s.push_str(&format!(
            "| {} | {:.3} | {:.0} | {:.0} | {} | {own:.3} / {children:.3} | {:.1} |\n",
            names[i],
            med[i],
            mb / med[i],
            o.lines as f64 / med[i],
            fmt_runs(&secs[i]),
            fixed_ms[i],
        ));
    }
    s.push_str(&format!(
        "\n**wakeful / `cat > file` throughput: {:.0} %** (target ≥ 50 %); \
         wakeful / `cat | cat > file`: {:.0} %.\n\n\
         Each run starts after `sync(2)`; one untimed warm-up run of each contender comes first. \
         Every copy (cat's and the monitor's output file) is verified byte-identical to the \
         input ({bytes} bytes, {} lines). Events per wakeful run: {} `lines` events carrying {} \
         lines, {} `suppressed` reports counting {} lines (rate limit: burst {BURST}, then 1/s); \
         delivered + suppressed = all lines. \"CPU s\" is user + system time from \
         `getrusage(2)` during the timed part: the bench process's own (for wakeful: the \
         engine's threads) and its reaped children's (`sh`, `cat`); medians. \"empty input\" \
         is the same command on an empty file: the fixed cost of starting and ending.\n",
        100.0 * med[0] / med[2],
        100.0 * med[1] / med[2],
        o.lines,
        last.events,
        last.delivered_lines,
        last.suppressed_reports,
        last.suppressed_lines,
    ));
    std::fs::remove_file(&input).ok();
    s
}

// ---------------------------------------------------------------- latency --

struct Stats {
    n: usize,
    median: u128,
    p90: u128,
    p99: u128,
    max: u128,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    assert!(!v.is_empty(), "no samples");
    v.sort();
    // Nearest-rank percentiles.
    let pct = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1].as_micros();
    Stats {
        n: v.len(),
        median: pct(0.5),
        p90: pct(0.9),
        p99: pct(0.99),
        max: v[v.len() - 1].as_micros(),
    }
}

async fn wait_started(sub: &mut Subscription, id: &str) {
    loop {
        match sub.recv().await {
            Ok(ev) if ev.monitor_id == id && ev.kind() == EventKind::Started => return,
            Ok(ev) if ev.monitor_id == id && ev.kind().is_terminal() => {
                panic!("latency monitor ended early: {}", ev.text)
            }
            Ok(_) => {}
            Err(e) => panic!("subscription: {e}"),
        }
    }
}

/// Waits for the `lines` event of monitor `id` that carries `line`; returns
/// when it was received. Any other `lines` event for `id` is a bench bug.
async fn wait_line(sub: &mut Subscription, id: &str, line: &str) -> Instant {
    loop {
        match sub.recv().await {
            Ok(ev) if ev.monitor_id == id => match &ev.body {
                EventBody::MonitorEvent { lines, .. } => {
                    let at = Instant::now();
                    assert!(
                        lines.iter().any(|l| l == line),
                        "expected `{line}`, got {lines:?}"
                    );
                    assert_eq!(lines.len(), 1, "a sample was coalesced: {lines:?}");
                    return at;
                }
                EventBody::MonitorSuppressed { .. } => panic!("a sample hit the rate limit"),
                b if b.kind().is_terminal() => panic!("latency monitor ended: {}", ev.text),
                _ => {}
            },
            Ok(_) => {}
            Err(e) => panic!("subscription: {e}"),
        }
    }
}

/// `samples` timed lines through monitors running `cat FIFO`, a fresh monitor
/// every [`SAMPLES_PER_MONITOR`] lines (so the rate limit never engages).
async fn latency_wakeful(
    registry: &MonitorRegistry,
    fifo: &Path,
    batch_ms: Option<u64>,
    samples: usize,
    pause: Duration,
) -> (Vec<Duration>, usize) {
    // O_RDWR on a FIFO never blocks on Linux, and keeps a writer open for
    // every `cat` that comes and goes, so none of them sees EOF.
    let mut w = OpenOptions::new()
        .read(true)
        .write(true)
        .open(fifo)
        .expect("open the FIFO");
    let mut sub = registry.subscribe();
    let mut out = Vec::with_capacity(samples);
    let mut monitors = 0;
    while out.len() < samples {
        let mut spec = MonitorSpec::command(format!("cat '{}'", fifo.display()), "bench latency");
        spec.batch_ms = batch_ms;
        let id = registry
            .start(spec)
            .await
            .expect("start the latency monitor")
            .info
            .id;
        monitors += 1;
        wait_started(&mut sub, &id).await;
        // Untimed warm-up: proves `cat` has the FIFO open and reading.
        let warm = format!("{PATTERN} warm-up {id}");
        w.write_all(format!("{warm}\n").as_bytes()).expect("write");
        wait_line(&mut sub, &id, &warm).await;
        for i in 0..SAMPLES_PER_MONITOR.min(samples - out.len()) {
            tokio::time::sleep(pause).await;
            let line = format!("{PATTERN} {id} sample {i}");
            let bytes = format!("{line}\n");
            let t0 = Instant::now();
            w.write_all(bytes.as_bytes()).expect("write");
            let at = wait_line(&mut sub, &id, &line).await;
            out.push(at - t0);
        }
        registry.stop(&id).await.expect("stop the latency monitor");
    }
    (out, monitors)
}

/// `samples` timed lines appended to a file that a *file* monitor follows
/// (inotify, like `tail -F`): the same appends the `tail -F | grep` row makes.
async fn latency_wakeful_file(
    registry: &MonitorRegistry,
    dir: &Path,
    samples: usize,
    pause: Duration,
) -> (Vec<Duration>, usize) {
    let file = dir.join("follow.log");
    let _ = std::fs::remove_file(&file);
    let mut w = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .expect("create the followed file");
    let mut sub = registry.subscribe();
    let mut out = Vec::with_capacity(samples);
    let mut monitors = 0;
    while out.len() < samples {
        let mut spec = MonitorSpec::command("unused", "bench file latency");
        spec.source = wakeful_core::Source::File { path: file.clone() };
        spec.batch_ms = Some(0);
        let id = registry
            .start(spec)
            .await
            .expect("start the file monitor")
            .info
            .id;
        monitors += 1;
        wait_started(&mut sub, &id).await;
        let warm = format!("{PATTERN} warm-up {id}");
        w.write_all(format!("{warm}\n").as_bytes()).expect("append");
        wait_line(&mut sub, &id, &warm).await;
        for i in 0..SAMPLES_PER_MONITOR.min(samples - out.len()) {
            tokio::time::sleep(pause).await;
            let line = format!("{PATTERN} {id} file sample {i}");
            let bytes = format!("{line}\n");
            let t0 = Instant::now();
            w.write_all(bytes.as_bytes()).expect("append");
            let at = wait_line(&mut sub, &id, &line).await;
            out.push(at - t0);
        }
        registry.stop(&id).await.expect("stop the file monitor");
    }
    (out, monitors)
}

/// The plain alternative: lines appended to a file, read back from
/// `tail -F FILE | grep --line-buffered PATTERN`.
fn latency_tail(dir: &Path, samples: usize, pause: Duration) -> (Vec<Duration>, &'static str) {
    let file = dir.join("tail.log");
    // A fresh, empty file: `tail -F` starts by printing its last lines.
    let _ = std::fs::remove_file(&file);
    let mut w = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .expect("create tail file");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "tail -F '{}' | grep --line-buffered '{PATTERN}'",
            file.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn tail | grep");
    let pgid = child.id() as i32;
    let mut r = BufReader::new(child.stdout.take().expect("grep stdout"));
    let mut got = String::new();
    let mut roundtrip = |line: &str| -> Duration {
        let t0 = Instant::now();
        w.write_all(format!("{line}\n").as_bytes()).expect("write");
        got.clear();
        r.read_line(&mut got).expect("read grep output");
        let d = t0.elapsed();
        assert_eq!(got.trim_end(), line, "tail | grep returned another line");
        d
    };
    // Warm-up: tail may not have its inotify watch yet; the first line is
    // picked up either way (tail reads the file's end when it starts).
    std::thread::sleep(Duration::from_millis(200));
    let mut note = "";
    let mut warm = Duration::ZERO;
    for i in 0..3 {
        warm = roundtrip(&format!("{PATTERN} warm-up {i}"));
    }
    let samples = if warm > Duration::from_millis(200) {
        // No inotify: tail polls once a second; keep the run short.
        note = " (tail is polling, not using inotify: sample count cut to 10)";
        samples.min(10)
    } else {
        samples
    };
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        std::thread::sleep(pause);
        out.push(roundtrip(&format!("{PATTERN} tail sample {i}")));
    }
    // The whole pipeline is one process group of its own: end it at once.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGTERM,
    );
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    let _ = child.wait();
    (out, note)
}

fn latency(
    rt: &tokio::runtime::Runtime,
    registry: &MonitorRegistry,
    dir: &Path,
    o: &Opts,
) -> String {
    let fifo = dir.join("lat.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");

    let t = Instant::now();
    let (unbatched, m0) = rt.block_on(latency_wakeful(
        registry,
        &fifo,
        Some(0),
        o.samples,
        UNBATCHED_PAUSE,
    ));
    eprintln!(
        "latency: wakeful batch_ms=0 done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let (batched, m1) = rt.block_on(latency_wakeful(
        registry,
        &fifo,
        None,
        o.batched_samples,
        BATCHED_PAUSE,
    ));
    eprintln!(
        "latency: wakeful batch_ms=200 done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let (followed, m2) = rt.block_on(latency_wakeful_file(
        registry,
        dir,
        o.samples,
        UNBATCHED_PAUSE,
    ));
    eprintln!(
        "latency: wakeful --file done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let (tail, note) = latency_tail(dir, o.samples, UNBATCHED_PAUSE);
    let (tail_idle, note_idle) = latency_tail(dir, o.batched_samples, BATCHED_PAUSE);
    eprintln!(
        "latency: tail -F | grep done in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let mut s = String::from(
        "\n## Latency: line written → line received (µs)\n\n\
         | path | samples | median | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n",
    );
    let mut row = |name: String, st: Option<Stats>| {
        if let Some(st) = st {
            s.push_str(&format!(
                "| {name} | {} | {} | {} | {} | {} |\n",
                st.n, st.median, st.p90, st.p99, st.max
            ));
        }
    };
    let nonempty = |v: Vec<Duration>| (!v.is_empty()).then(|| stats(v));
    row(
        format!(
            "wakeful, `batch_ms: 0`, lines {} ms apart ({m0} monitors)",
            UNBATCHED_PAUSE.as_millis()
        ),
        nonempty(unbatched),
    );
    row(
        format!(
            "wakeful, default `batch_ms` (200), lines {} ms apart ({m1} monitors)",
            BATCHED_PAUSE.as_millis()
        ),
        nonempty(batched),
    );
    row(
        format!(
            "wakeful file source (`--file`, inotify), `batch_ms: 0`, appends {} ms apart ({m2} monitors)",
            UNBATCHED_PAUSE.as_millis()
        ),
        nonempty(followed),
    );
    row(
        format!(
            "`tail -F FILE \\| grep --line-buffered {PATTERN}`, lines {} ms apart{note}",
            UNBATCHED_PAUSE.as_millis()
        ),
        nonempty(tail),
    );
    row(
        format!(
            "`tail -F FILE \\| grep --line-buffered {PATTERN}`, lines {} ms apart{note_idle}",
            BATCHED_PAUSE.as_millis()
        ),
        nonempty(tail_idle),
    );
    s.push_str(&format!(
        "\nMethod: the clock starts just before the `write(2)` of one line and stops when the \
         subscriber's `recv()` returns the `lines` event carrying it (wakeful), or when \
         `read_line` on grep's stdout returns it (tail | grep). With default batching, lines are \
         {} ms apart, longer than the 200 ms window, so every line is a leading edge and goes \
         out at once; the matching tail row uses the same spacing, since a long pause lets \
         CPUs and threads go idle and makes every wake-up slower. The {} ms rows measure the \
         engine path itself. Each wakeful monitor takes one untimed warm-up \
         line and then at most {SAMPLES_PER_MONITOR} timed lines, then is stopped and a fresh \
         one started: {} events stay within the rate limit's burst of {BURST}, so no sample is \
         suppressed or waits for a token (the bench asserts that every sample arrives alone in \
         its own `lines` event).\n",
        BATCHED_PAUSE.as_millis(),
        UNBATCHED_PAUSE.as_millis(),
        SAMPLES_PER_MONITOR + 1,
    ));
    s
}
