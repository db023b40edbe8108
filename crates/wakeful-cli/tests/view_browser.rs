//! `wakeful web` in a real browser: headless Chromium, driven through the
//! DevTools protocol, loads the page, sees a monitor's line appear within
//! a second of being printed, clicks stop, and sees the monitor end. The
//! test takes a screenshot (for the README: set WAKEFUL_SCREENSHOT_DIR).
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod view_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{eventually, Home};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use view_support::Web;

/// Headless Chromium in a process group of its own; the group is killed
/// on drop.
struct Chromium {
    child: Child,
    _profile: tempfile::TempDir,
    ws_url: String,
}

impl Chromium {
    fn start() -> Option<Chromium> {
        let exe = ["chromium", "chromium-browser"].into_iter().find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
        let Some(exe) = exe else {
            assert!(
                std::env::var_os("CI").is_none(),
                "chromium is needed for this test (.ci/run installs it)"
            );
            eprintln!("skipped: chromium is not installed (apt-get install chromium)");
            return None;
        };
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1400,860",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let mut chromium = Chromium {
            child,
            _profile: profile,
            ws_url: String::new(),
        };
        chromium.ws_url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium did not open its DevTools port");
        Some(chromium)
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        // SAFETY: killpg with the group this test created for chromium.
        unsafe {
            libc::killpg(self.child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A DevTools protocol client attached to one page (flat sessions).
struct Cdp {
    ws: Ws,
    next_id: u64,
    session: Option<String>,
}

impl Cdp {
    async fn connect(url: &str) -> Cdp {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Cdp {
            ws,
            next_id: 1,
            session: None,
        }
    }

    /// A new page of `chromium` at `url`, attached.
    async fn open(chromium: &Chromium, url: &str) -> Cdp {
        let mut cdp = Cdp::connect(&chromium.ws_url).await;
        let target = cdp.call("Target.createTarget", json!({"url": url})).await;
        let attached = cdp
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        cdp.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        cdp
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .unwrap()
                .unwrap();
            let Message::Text(text) = m else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates JavaScript in the page; its value.
    async fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits until `expression` is true in the page.
    async fn until(&mut self, expression: &str, limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            if self.eval(expression).await == json!(true) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < limit,
                "never true: {expression}; the page says: {}",
                self.eval("document.body.innerText").await
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, v)| acc | (u32::from(*v) << (18 - 6 * i)));
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

/// Opens a FIFO for writing once a reader has it open.
fn open_writer(path: &std::path::Path) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = None;
    assert!(eventually(Duration::from_secs(10), || {
        file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .ok();
        file.is_some()
    }));
    file.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_sees_a_line_within_a_second_and_stops_the_monitor() {
    let Some(chromium) = Chromium::start() else {
        return;
    };
    let home = Home::new();
    let fifo = home.path().join("feed.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Some history and a failed monitor, for the screenshot.
    home.ok(&[
        "start",
        "-d",
        "unit tests",
        "--",
        "echo 'test store ... FAILED'; echo 'error: 1 test failed'; exit 101",
    ]);
    let id = home
        .ok(&[
            "start",
            "-d",
            "deploy log",
            "--batch-ms",
            "0",
            "--",
            &format!("cat {}", fifo.display()),
        ])
        .trim()
        .to_string();
    let mut writer = open_writer(&fifo);
    for i in 1..=8 {
        writeln!(writer, "step {i}/8: deploying shard {i}").unwrap();
    }
    let web = Web::start(&home, &[]);

    let mut cdp = Cdp::open(&chromium, &web.url).await;

    // The page loads (the token became a cookie), lists the monitor and
    // streams its events.
    cdp.until(
        &format!("!!document.querySelector('tr[data-id=\"{id}\"]')"),
        Duration::from_secs(20),
    )
    .await;
    cdp.until(
        "document.getElementById('events').textContent.includes('step 8/8')",
        Duration::from_secs(10),
    )
    .await;
    cdp.until(
        "document.getElementById('link').textContent.includes('live')",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(
        cdp.eval("location.search").await,
        "",
        "the token left the URL"
    );
    assert_eq!(
        cdp.eval("document.cookie").await,
        "",
        "the cookie is HttpOnly: scripts cannot read it"
    );

    // A line printed now is on the page within a second.
    let started = Instant::now();
    writeln!(
        writer,
        "probe <img src=x onerror=alert(1)> {}",
        std::process::id()
    )
    .unwrap();
    cdp.until(
        &format!(
            "document.getElementById('events').textContent.includes('probe <img src=x onerror=alert(1)> {}')",
            std::process::id()
        ),
        Duration::from_secs(5),
    )
    .await;
    let latency = started.elapsed();
    assert!(
        latency < Duration::from_secs(1),
        "the line took {latency:?}"
    );
    // It is text, not HTML.
    assert_eq!(
        cdp.eval("document.querySelectorAll('#events img').length")
            .await,
        0
    );

    // A screenshot of the page as it is.
    let shot = cdp
        .call("Page.captureScreenshot", json!({"format": "png"}))
        .await;
    let png = base64_decode(shot["data"].as_str().unwrap());
    assert_eq!(&png[1..4], b"PNG");
    let dir = std::env::var_os("WAKEFUL_SCREENSHOT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    std::fs::write(dir.join("web.png"), &png).unwrap();

    // Search highlights matches (as text in <mark>), and `e` marks the
    // next line that looks like an error.
    cdp.eval(
        "const s = document.getElementById('search'); s.value = 'shard [0-9]'; \
         s.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'})); true",
    )
    .await;
    cdp.until(
        "document.querySelectorAll('#events mark').length >= 8",
        Duration::from_secs(5),
    )
    .await;
    cdp.eval("document.getElementById('search').value = ''; document.getElementById('search').dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'})); true").await;
    cdp.eval("document.getElementById('error').click(); true")
        .await;
    cdp.until(
        "(document.querySelector('#events .row.cursor') || {textContent: ''}).textContent.includes('FAILED')",
        Duration::from_secs(5),
    )
    .await;
    // Scrolling up pauses the follow; new lines are counted, not shown at
    // the bottom; the button follows again. (Enough lines to scroll first:
    // one write, one event.)
    let filler: String = (1..=60).map(|i| format!("filler {i}\n")).collect();
    writer.write_all(filler.as_bytes()).unwrap();
    cdp.until(
        "document.getElementById('events').textContent.includes('filler 60')",
        Duration::from_secs(5),
    )
    .await;
    cdp.eval("document.getElementById('follow').click(); const b = document.getElementById('events'); b.scrollTop = 0; b.dispatchEvent(new Event('scroll')); true").await;
    writeln!(writer, "while paused 1").unwrap();
    writeln!(writer, "while paused 2").unwrap();
    cdp.until(
        "document.getElementById('follow').textContent.includes('new') && !document.getElementById('follow').hidden",
        Duration::from_secs(5),
    )
    .await;
    cdp.eval("document.getElementById('follow').click(); true")
        .await;
    cdp.until(
        "document.getElementById('follow').hidden",
        Duration::from_secs(5),
    )
    .await;

    // Click stop (a real click on the button; the confirmation answered yes).
    cdp.eval(&format!(
        "window.confirm = () => true; document.querySelector('button.stop[data-id=\"{id}\"]').click(); true"
    ))
    .await;
    cdp.until(
        &format!("document.querySelector('tr[data-id=\"{id}\"]').dataset.state === 'ended'"),
        Duration::from_secs(15),
    )
    .await;
    let list = home.json(&["list"]);
    let m = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id.as_str())
        .unwrap();
    assert_eq!(m["state"], "ended");
    assert_eq!(m["stop_reason"]["kind"], "stopped");
    cdp.until(
        "document.getElementById('events').textContent.includes('deploy log: stopped')",
        Duration::from_secs(10),
    )
    .await;
    let _ = cdp.call("Browser.close", json!({})).await;
}

/// A page of another server on 127.0.0.1 (another port: the same site),
/// serving `html` and recording the `Cookie` header of every request the
/// browser sends it.
struct OtherServer {
    port: u16,
    cookies: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl OtherServer {
    fn start(html: String) -> OtherServer {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cookies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = cookies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut buf = vec![0u8; 16 * 1024];
                let n = stream.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                for line in head.lines() {
                    if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case("cookie") {
                            seen.lock().unwrap().push(v.trim().to_string());
                        }
                    }
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                    html.len()
                );
            }
        });
        OtherServer { port, cookies }
    }
}

/// Issue #31, points 3 and 4, in a real browser: hostile lines render as
/// inert text; the launch token is spent once the page opened, so the
/// session cookie another server on 127.0.0.1 receives is not it and opens
/// nothing as a launch URL; and a page on another port (the same site, so
/// the SameSite=Strict cookie goes along) can neither read the API or the
/// event stream nor stop a monitor (a no-cors POST carries the cookie and
/// its own Origin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_port_gets_nothing_and_hostile_lines_stay_text() {
    let Some(chromium) = Chromium::start() else {
        return;
    };
    let home = Home::new();
    let lines = home.path().join("hostile.txt");
    std::fs::write(
        &lines,
        "probe-1 <img src=x onerror=\"window.pwned=1\">\n\
         probe-2 </script><script>window.pwned=2</script>\n\
         probe-3 javascript:window.pwned=3\n\
         probe-4 <a href=\"javascript:window.pwned=4\">click</a>\n\
         probe-5 \u{202E}evil\u{202C} \u{200B}hidden\n",
    )
    .unwrap();
    let id = home
        .ok(&[
            "start",
            "-d",
            "hostile <b>page</b>",
            "--",
            &format!("cat {}; sleep 600", lines.display()),
        ])
        .trim()
        .to_string();
    let web = Web::start(&home, &[]);
    let mut cdp = Cdp::open(&chromium, &web.url).await;
    cdp.until(
        "(document.getElementById('events') || {textContent: ''}).textContent.includes('probe-5')",
        Duration::from_secs(20),
    )
    .await;
    let text = cdp.eval("document.body.textContent").await;
    let text = text.as_str().unwrap();
    for probe in [
        "probe-1 <img src=x onerror=\"window.pwned=1\">",
        "probe-2 </script><script>window.pwned=2</script>",
        "probe-3 javascript:window.pwned=3",
        "probe-4 <a href=\"javascript:window.pwned=4\">click</a>",
        "probe-5 evil hidden",
        "hostile <b>page</b>",
    ] {
        assert!(
            text.contains(probe),
            "{probe:?} is not shown as text: {text}"
        );
    }
    assert!(
        !text.contains('\u{202E}') && !text.contains('\u{200B}'),
        "{text:?}"
    );
    assert_eq!(cdp.eval("typeof window.pwned").await, "undefined");
    assert_eq!(
        cdp.eval("document.querySelectorAll('#events img, #events script, #events a, #monitors img, #monitors b').length")
            .await,
        0
    );

    // A page of another server on 127.0.0.1.
    let attack = format!(
        r#"<!doctype html><title>other</title>
<script>
window.results = {{}};
fetch("http://127.0.0.1:{p}/api/state", {{credentials: "include"}})
  .then(r => r.text()).then(t => results.state = "read " + t).catch(() => results.state = "blocked");
fetch("http://127.0.0.1:{p}/api/stop?id={id}", {{method: "POST", credentials: "include", mode: "no-cors"}})
  .then(() => results.stop = "sent").catch(() => results.stop = "error");
const es = new EventSource("http://127.0.0.1:{p}/api/events", {{withCredentials: true}});
es.onmessage = () => results.sse = "read";
es.onerror = () => {{ results.sse = results.sse || "blocked"; es.close(); }};
</script>"#,
        p = web.port
    );
    let other = OtherServer::start(attack);
    cdp.call(
        "Page.navigate",
        json!({"url": format!("http://127.0.0.1:{}/", other.port)}),
    )
    .await;
    // Each attempt answered (the stop's POST was answered by the server).
    cdp.until(
        "!!(window.results && results.state && results.stop && results.sse)",
        Duration::from_secs(20),
    )
    .await;
    let results = cdp.eval("window.results").await;
    assert_eq!(results["state"], "blocked", "{results}");
    assert_ne!(results["sse"], "read", "{results}");
    assert_eq!(home.json(&["list"])[0]["state"], "running", "{results}");
    assert_eq!(home.json(&["list"])[0]["id"], id.as_str());

    // The other server got this server's cookie (cookies do not tell ports
    // apart): it is a session value, not the launch token, and as a launch
    // token it opens nothing.
    let cookies = other.cookies.lock().unwrap().clone();
    let name = format!("wakeful_web_{}=", web.port);
    let value = cookies
        .iter()
        .flat_map(|c| c.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(name.as_str()).map(str::to_string))
        .unwrap_or_else(|| panic!("the browser sent no {name} to the other port: {cookies:?}"));
    assert_ne!(value, web.token);
    let r = view_support::http(
        web.port,
        "GET",
        &format!("/?token={value}"),
        &[("Host", &web.host())],
    );
    assert_eq!(r.status, 401, "{r:?}");
    let r = view_support::http(
        web.port,
        "GET",
        &format!("/?token={}", web.token),
        &[("Host", &web.host())],
    );
    assert_eq!(r.status, 401, "the launch token is spent: {r:?}");
    let _ = cdp.call("Browser.close", json!({})).await;
}
