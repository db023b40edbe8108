//! Test support for `wakeful web`: the server as a child process, and a
//! small HTTP/1.1 and server-sent-events client over std sockets.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::Home;

/// A `wakeful web` child; killed (by its pid) on drop.
pub struct Web {
    pub child: Child,
    pub url: String,
    pub port: u16,
    pub token: String,
    /// The session value the token was exchanged for (by [`Web::cookie`]).
    session: std::cell::OnceCell<String>,
}

impl Web {
    pub fn start(home: &Home, extra: &[&str]) -> Web {
        let mut args = vec!["web", "--port", "0"];
        args.extend_from_slice(extra);
        let mut child = home
            .cmd(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let port = url["http://127.0.0.1:".len()..]
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let token = url.rsplit_once("token=").unwrap().1.to_string();
        Web {
            child,
            url,
            port,
            token,
            session: std::cell::OnceCell::new(),
        }
    }

    /// Takes `value` as the session (exchanged by the caller).
    pub fn adopt(&self, value: &str) {
        assert!(
            self.session.set(value.to_string()).is_ok(),
            "a session already"
        );
    }

    /// The session cookie (`name=value`): the launch token exchanged once,
    /// as a browser does.
    pub fn cookie(&self) -> String {
        let value = self.session.get_or_init(|| {
            let host = self.host();
            let r = http(
                self.port,
                "GET",
                &format!("/?token={}", self.token),
                &[("Host", host.as_str())],
            );
            assert_eq!(r.status, 303, "the token exchange: {r:?}");
            let set = r.header("set-cookie").expect("a session cookie");
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            assert_eq!(name, format!("wakeful_web_{}", self.port));
            value.to_string()
        });
        format!("wakeful_web_{}={value}", self.port)
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A request with the cookie and the right Host.
    pub fn get(&self, path: &str) -> Response {
        let cookie = self.cookie();
        let host = self.host();
        http(
            self.port,
            "GET",
            path,
            &[("Host", host.as_str()), ("Cookie", cookie.as_str())],
        )
    }

    /// An SSE stream with the cookie.
    pub fn sse(&self, path: &str, last_event_id: Option<u64>) -> Sse {
        let cookie = self.cookie();
        let host = self.host();
        let id = last_event_id.map(|i| i.to_string());
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Cookie", cookie.as_str()),
            ("Accept", "text/event-stream"),
        ];
        if let Some(id) = &id {
            headers.push(("Last-Event-ID", id.as_str()));
        }
        Sse::open(self.port, path, &headers)
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

fn request_text(method: &str, path: &str, headers: &[(&str, &str)]) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("Connection: close\r\n\r\n");
    req
}

/// One request (headers given as they should go, Host included or not).
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request_text(method, path, headers).as_bytes())
        .unwrap();
    let mut raw = vec![];
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Response {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A server-sent-events stream read line by line.
pub struct Sse {
    pub reader: BufReader<TcpStream>,
    pub status: u16,
}

/// One event or comment of a stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Event { id: u64, data: serde_json::Value },
    Comment(String),
}

impl Sse {
    pub fn open(port: u16, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request_text("GET", path, headers).as_bytes())
            .unwrap();
        let mut reader = BufReader::new(s);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).unwrap();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        loop {
            let mut l = String::new();
            reader.read_line(&mut l).unwrap();
            if l == "\r\n" || l.is_empty() {
                break;
            }
        }
        Sse { reader, status }
    }

    pub fn set_timeout(&self, t: Duration) {
        self.reader.get_ref().set_read_timeout(Some(t)).unwrap();
    }

    /// The next event or comment; None on a timeout or the end. The body
    /// is chunked: chunk-size lines are skipped.
    pub fn next(&mut self) -> Option<Item> {
        let mut id = None;
        let mut data = None;
        loop {
            let mut l = String::new();
            match self.reader.read_line(&mut l) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let l = l.trim_end_matches(['\r', '\n']);
            if let Some(v) = l.strip_prefix("id:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = l.strip_prefix("data:") {
                data = serde_json::from_str(v.trim()).ok();
            } else if let Some(c) = l.strip_prefix(':') {
                return Some(Item::Comment(c.trim().to_string()));
            } else if l.is_empty() {
                if let (Some(id), Some(data)) = (id, data.take()) {
                    return Some(Item::Event { id, data });
                }
            }
            // else: a chunk size line.
        }
    }

    /// The next event, skipping comments.
    pub fn next_event(&mut self) -> Option<(u64, serde_json::Value)> {
        loop {
            match self.next()? {
                Item::Event { id, data } => return Some((id, data)),
                Item::Comment(_) => {}
            }
        }
    }
}
