//! Engine benchmarks: a [`MonitorRegistry`] embedded in this process, no
//! daemon, each path beside the plain shell alternative in the same group.
//!
//! ```sh
//! cargo bench --locked -p wakeful-engine --bench engine
//! cargo bench --locked -p wakeful-engine --bench engine -- latency   # one group
//! WAKEFUL_BENCH_LINES=100000 cargo bench --locked -p wakeful-engine --bench engine -- ingest
//! ```
//!
//! - `ingest`: a generated file of 1,000,000 log-like lines (~70 MB;
//!   `WAKEFUL_BENCH_LINES` sets another count) copied by a wakeful monitor
//!   running `cat INPUT` (start until its `stopped` event reaches a
//!   subscriber), by `sh -c 'cat INPUT > OUT'` and by
//!   `sh -c 'cat INPUT | cat > OUT'`. Each sample is one full copy, after
//!   `sync(2)`; every contender's copy is first checked byte-identical to the
//!   input, untimed (the registry's output cap is raised to 1 GiB for that:
//!   the default 64 MiB would drop a middle segment of the copy).
//! - `latency`: one line from its `write(2)` until its reader has it, each
//!   sample timed alone, lines 2 ms apart (the pause, untimed, lets every
//!   thread go idle, so a sample pays the wake-ups a sporadic line pays).
//!
//! The processes on a line's way differ between the latency paths; each
//! bench's doc comment says how many wake (the writer not counted).
//! The load average is printed to stderr before and after the run.
//!
//! Run as a test (`cargo test --benches`, or `cargo bench -- --test`), each
//! bench runs once, with a 10,000-line ingest input.
// A benchmark: a failed step ends the run with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use divan::counter::{BytesCount, ItemsCount};
use divan::Bencher;
use wakeful_core::rate::BURST;
use wakeful_core::storage::{ByteSize, OutputCaps};
use wakeful_core::{EventBody, EventKind, MonitorSpec, MonitorStopReason};
use wakeful_engine::{
    DiskGuard, MonitorRegistry, OutputBudget, RecvError, RegistryConfig, Subscription,
};

fn main() {
    eprintln!("load average at start: {}", load_average());
    divan::main();
    eprintln!("load average at the end: {}", load_average());
    if let Some(fx) = FIXTURE.get() {
        let _ = std::fs::remove_dir_all(fx.dir.path());
    }
}

/// The 1, 5 and 15 minute load averages: anything else running skews
/// figures on a small machine.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// What every bench shares: a temporary directory, a runtime and one
/// registry writing its output files under the directory.
struct Fixture {
    dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    registry: MonitorRegistry,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("wakeful-bench-")
            .tempdir()
            .expect("create a temp dir");
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        let output_dir = dir.path().join("out");
        // An output file's cap (default 64 MiB, an eighth of it a segment)
        // raised to 1 GiB: the ingest copy stays whole, in one file.
        let caps = OutputCaps {
            per_file: ByteSize::gib(1).0,
            total: ByteSize::gib(4).0,
        };
        let output = OutputBudget::new(caps, DiskGuard::new(&output_dir, Default::default()));
        let registry = rt.block_on(async {
            MonitorRegistry::new(RegistryConfig {
                output_dir,
                output: Some(output),
                ..RegistryConfig::default()
            })
        });
        Fixture { dir, rt, registry }
    })
}

/// Waits for monitor `id`'s `started` event.
async fn wait_started(sub: &mut Subscription, id: &str) {
    loop {
        match sub.recv().await {
            Ok(ev) if ev.monitor_id == id && ev.kind() == EventKind::Started => return,
            Ok(ev) if ev.monitor_id == id && ev.kind().is_terminal() => {
                panic!("monitor ended early: {}", ev.text)
            }
            Ok(_) => {}
            Err(e) => panic!("subscription: {e}"),
        }
    }
}

mod ingest {
    use super::*;

    /// The ingest input: its path, bytes and lines.
    struct Input {
        path: PathBuf,
        bytes: u64,
        lines: usize,
    }

    static INPUT: OnceLock<Input> = OnceLock::new();

    /// The input, generated on first use: `WAKEFUL_BENCH_LINES` lines, or
    /// 1,000,000 under `cargo bench` and 10,000 when run as a test.
    fn input() -> &'static Input {
        INPUT.get_or_init(|| {
            let benching = std::env::args().any(|a| a == "--bench");
            let lines = std::env::var("WAKEFUL_BENCH_LINES")
                .ok()
                .map(|v| v.parse().expect("WAKEFUL_BENCH_LINES: a number"))
                .unwrap_or(if benching { 1_000_000 } else { 10_000 });
            let path = fixture().dir.path().join("input.log");
            let bytes = generate_input(&path, lines);
            Input { path, bytes, lines }
        })
    }

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

    /// The output file must be the input, byte for byte.
    fn verify_copy(input: &Input, output: &Path) {
        let a = std::fs::read(&input.path).expect("read input");
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
        assert_eq!(
            nl, input.lines,
            "output has {nl} lines, input {}",
            input.lines
        );
        assert!(a == b, "output differs from input");
    }

    /// A copy, removed when dropped (after its sample's timing).
    struct OutputFile(PathBuf);

    impl Drop for OutputFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Lines of one monitor run, as its events counted them.
    struct Counts {
        delivered: u64,
        suppressed: u64,
    }

    /// Starts a monitor running `cat INPUT` and waits for its `stopped`
    /// event; returns its output file and its lines.
    async fn monitor_copy(
        registry: &MonitorRegistry,
        mut sub: Subscription,
    ) -> (OutputFile, Counts) {
        let started = registry
            .start(MonitorSpec::command(
                format!("cat '{}'", input().path.display()),
                "bench ingest",
            ))
            .await
            .expect("start the ingest monitor");
        let id = started.info.id;
        let copy = OutputFile(started.info.output_path);
        let mut counts = Counts {
            delivered: 0,
            suppressed: 0,
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
                EventBody::MonitorEvent { lines, .. } => counts.delivered += lines.len() as u64,
                EventBody::MonitorSuppressed { count, .. } => counts.suppressed += count,
                EventBody::MonitorStopped { reason, .. } => {
                    assert_eq!(
                        *reason,
                        MonitorStopReason::ExitCode { code: 0 },
                        "ingest monitor ended badly"
                    );
                    return (copy, counts);
                }
                EventBody::MonitorFailed { error, .. } => panic!("ingest monitor failed: {error}"),
                _ => {}
            }
        }
    }

    /// `sh -c SCRIPT`, `{in}` and `{out}` in the script replaced by the
    /// quoted paths.
    fn sh_copy(script: &str, out: &Path) -> OutputFile {
        let cmd = script
            .replace("{in}", &format!("'{}'", input().path.display()))
            .replace("{out}", &format!("'{}'", out.display()));
        let status = Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .status()
            .expect("run sh -c");
        assert!(status.success(), "`{cmd}` failed: {status}");
        OutputFile(out.to_path_buf())
    }

    /// A shell contender: one checked copy untimed, then the samples.
    fn bench_sh(bencher: Bencher, script: &str) {
        let input = input();
        let out = fixture().dir.path().join("copy.log");
        let copy = sh_copy(script, &out);
        verify_copy(input, &copy.0);
        drop(copy);
        bencher
            .counter(BytesCount::new(input.bytes))
            .counter(ItemsCount::new(input.lines))
            .with_inputs(nix::unistd::sync)
            .bench_local_values(|()| sh_copy(script, &out));
    }

    /// A wakeful monitor running `cat INPUT`, from `start` until its
    /// `stopped` event reaches a subscriber. Its output file is checked
    /// byte-identical to the input once (untimed), and every line is either
    /// delivered in a `lines` event or counted in a `suppressed` one.
    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn wakeful_monitor(bencher: Bencher) {
        let fx = fixture();
        let input = input();
        let (copy, counts) = fx
            .rt
            .block_on(monitor_copy(&fx.registry, fx.registry.subscribe()));
        verify_copy(input, &copy.0);
        assert_eq!(
            counts.delivered + counts.suppressed,
            input.lines as u64,
            "every line is either delivered or counted as suppressed"
        );
        drop(copy);
        bencher
            .counter(BytesCount::new(input.bytes))
            .counter(ItemsCount::new(input.lines))
            .with_inputs(|| {
                // Start with no dirty pages left over from the last sample.
                nix::unistd::sync();
                fx.registry.subscribe()
            })
            .bench_local_values(|sub| fx.rt.block_on(monitor_copy(&fx.registry, sub)).0);
    }

    /// `sh -c 'cat INPUT > OUT'`: GNU `cat` copies file to file with
    /// `copy_file_range(2)`, inside the kernel.
    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn cat_to_file(bencher: Bencher) {
        bench_sh(bencher, "cat {in} > {out}");
    }

    /// `sh -c 'cat INPUT | cat > OUT'`: the same bytes through a pipe, as
    /// any reader of a pipe (a monitor's) takes them.
    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn cat_pipe_cat(bencher: Bencher) {
        bench_sh(bencher, "cat {in} | cat > {out}");
    }
}

mod latency {
    use super::*;
    use std::cell::RefCell;

    /// Timed lines per monitor (plus one untimed warm-up line): stays below
    /// the rate limit's burst, so no sample is ever suppressed or delayed by it.
    const SAMPLES_PER_MONITOR: usize = 15;
    const _: () = assert!(SAMPLES_PER_MONITOR < BURST as usize);
    /// Pause before each sample, untimed.
    const PAUSE: Duration = Duration::from_millis(2);
    const PATTERN: &str = "bench-lat";

    /// Waits for the `lines` event of monitor `id` that carries `line`. Any
    /// other `lines` event for `id` is a bench bug.
    async fn wait_line(sub: &mut Subscription, id: &str, line: &str) {
        loop {
            match sub.recv().await {
                Ok(ev) if ev.monitor_id == id => match &ev.body {
                    EventBody::MonitorEvent { lines, .. } => {
                        assert!(
                            lines.len() == 1 && lines[0] == line,
                            "expected `{line}` alone, got {lines:?}"
                        );
                        return;
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

    /// Monitors of one spec, a fresh one every [`SAMPLES_PER_MONITOR`]
    /// lines, and the writer their lines come from.
    struct Rotation {
        spec: Box<dyn Fn() -> MonitorSpec>,
        w: File,
        sub: Subscription,
        id: Option<String>,
        left: usize,
        sent: usize,
    }

    impl Rotation {
        fn new(w: File, spec: Box<dyn Fn() -> MonitorSpec>) -> Rotation {
            Rotation {
                spec,
                w,
                sub: fixture().registry.subscribe(),
                id: None,
                left: 0,
                sent: 0,
            }
        }

        /// Untimed: a fresh monitor if this one had its lines (started and
        /// proven reading by a warm-up line), then the pause. Returns the
        /// next line to time.
        fn next_line(&mut self) -> String {
            let fx = fixture();
            if self.left == 0 {
                self.stop();
                fx.rt.block_on(async {
                    let id = fx
                        .registry
                        .start((self.spec)())
                        .await
                        .expect("start the latency monitor")
                        .info
                        .id;
                    wait_started(&mut self.sub, &id).await;
                    let warm = format!("{PATTERN} warm-up {id}");
                    self.w
                        .write_all(format!("{warm}\n").as_bytes())
                        .expect("write");
                    wait_line(&mut self.sub, &id, &warm).await;
                    self.id = Some(id);
                });
                self.left = SAMPLES_PER_MONITOR;
            }
            self.left -= 1;
            self.sent += 1;
            std::thread::sleep(PAUSE);
            format!("{PATTERN} sample {}", self.sent)
        }

        /// Timed: writes `line` and waits for its `lines` event.
        fn roundtrip(&mut self, line: &str) {
            let id = self.id.as_deref().expect("a monitor");
            self.w
                .write_all(format!("{line}\n").as_bytes())
                .expect("write");
            fixture().rt.block_on(wait_line(&mut self.sub, id, line));
        }

        fn stop(&mut self) {
            if let Some(id) = self.id.take() {
                let fx = fixture();
                fx.rt
                    .block_on(fx.registry.stop(&id))
                    .expect("stop the latency monitor");
            }
        }
    }

    fn bench_rotation(bencher: Bencher, rotation: Rotation) {
        let rot = RefCell::new(rotation);
        bencher
            .with_inputs(|| rot.borrow_mut().next_line())
            .bench_local_values(|line| rot.borrow_mut().roundtrip(&line));
        rot.borrow_mut().stop();
    }

    /// A command monitor running `cat FIFO` (`batch_ms: 0`): a line written
    /// to the FIFO until its `lines` event reaches a subscriber.
    /// **2 processes wake:** `cat`, and this benchmark (the engine's threads).
    #[divan::bench(sample_size = 1, sample_count = 300)]
    fn command_source_fifo(bencher: Bencher) {
        let fifo = fixture().dir.path().join("lat.fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        // O_RDWR on a FIFO never blocks on Linux, and keeps a writer open for
        // every `cat` that comes and goes, so none of them sees EOF.
        let w = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .expect("open the FIFO");
        let spec = Box::new(move || {
            let mut spec =
                MonitorSpec::command(format!("cat '{}'", fifo.display()), "bench latency");
            spec.batch_ms = Some(0);
            spec
        });
        bench_rotation(bencher, Rotation::new(w, spec));
    }

    /// A file monitor (`--file`, inotify; `batch_ms: 0`) following a file:
    /// a line appended until its `lines` event reaches a subscriber.
    /// **1 process wakes:** this benchmark (the engine's threads).
    #[divan::bench(sample_size = 1, sample_count = 300)]
    fn file_source(bencher: Bencher) {
        let file = fixture().dir.path().join("follow.log");
        let w = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .expect("create the followed file");
        let spec = Box::new(move || {
            let mut spec = MonitorSpec::command("unused", "bench file latency");
            spec.source = wakeful_core::Source::File { path: file.clone() };
            spec.batch_ms = Some(0);
            spec
        });
        bench_rotation(bencher, Rotation::new(w, spec));
    }

    /// The plain alternative: a line appended to a file followed by
    /// `tail -F FILE | grep --line-buffered PATTERN`, until `read_line` on
    /// grep's stdout returns it.
    /// **3 processes wake:** `tail`, `grep`, and this benchmark.
    #[divan::bench(sample_size = 1, sample_count = 300)]
    fn tail_grep(bencher: Bencher) {
        let file = fixture().dir.path().join("tail.log");
        // A fresh, empty file: `tail -F` starts by printing its last lines.
        let mut w = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&file)
            .expect("create the tail file");
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
        let mut roundtrip = |line: &str| {
            w.write_all(format!("{line}\n").as_bytes()).expect("write");
            got.clear();
            r.read_line(&mut got).expect("read grep output");
            assert_eq!(got.trim_end(), line, "tail | grep returned another line");
        };
        // Warm-up, until tail has its inotify watch: the first line is picked
        // up either way (tail reads the file's end when it starts), and a
        // tail without inotify polls once a second.
        std::thread::sleep(Duration::from_millis(200));
        for i in 0..3 {
            let t0 = std::time::Instant::now();
            roundtrip(&format!("{PATTERN} warm-up {i}"));
            if i == 2 {
                assert!(
                    t0.elapsed() < Duration::from_millis(200),
                    "tail -F is polling, not using inotify"
                );
            }
        }
        let mut sent = 0;
        bencher
            .with_inputs(|| {
                sent += 1;
                std::thread::sleep(PAUSE);
                format!("{PATTERN} tail sample {sent}")
            })
            .bench_local_values(|line| roundtrip(&line));
        // The whole pipeline is one process group of its own: end it at once.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGTERM,
        );
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
        let _ = child.wait();
    }
}
