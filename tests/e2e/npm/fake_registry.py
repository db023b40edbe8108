#!/usr/bin/env python3
"""A local npm registry that serves the tarballs `npm pack` made, so that npm,
npx and Claude Code install wakeful from it exactly as they would from
registry.npmjs.org, with nothing leaving the machine.

It answers the two requests an install makes: the packument of a name
(`GET /wakeful`, `GET /@wakeful%2flinux-x64-gnu`: every version with its
manifest, `dist.tarball`, `dist.integrity`, `dist.shasum`) and the tarball at
the path registry.npmjs.org uses (`/<name>/-/<basename>-<version>.tgz`;
npm rewrites a lockfile's registry.npmjs.org URLs to the configured registry
and keeps that path). Every other name is 404, as an unpublished one is.

Usage: fake_registry.py DIR [--port 0] [--log FILE]
Serves DIR/*.tgz; prints `port N` once it listens; logs `METHOD PATH STATUS`
lines to FILE. Standard library only.
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import sys
import tarfile
import threading
import urllib.parse


def read_manifest(tgz):
    with tarfile.open(tgz, "r:gz") as t:
        member = t.getmember("package/package.json")
        return json.load(t.extractfile(member))


def tarball_path(name, version):
    return f"/{name}/-/{name.split('/')[-1]}-{version}.tgz"


class Registry:
    def __init__(self, directory):
        self.packuments = {}
        self.tarballs = {}
        for f in sorted(os.listdir(directory)):
            if not f.endswith(".tgz"):
                continue
            path = os.path.join(directory, f)
            data = open(path, "rb").read()
            manifest = read_manifest(path)
            name, version = manifest["name"], manifest["version"]
            url_path = tarball_path(name, version)
            self.tarballs[url_path] = data
            entry = self.packuments.setdefault(
                name, {"name": name, "dist-tags": {}, "versions": {}})
            manifest["dist"] = {
                "tarball": url_path,  # made absolute per request (the port)
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
                "shasum": hashlib.sha1(data).hexdigest(),
            }
            entry["versions"][version] = manifest
            entry["dist-tags"]["latest"] = version

    def packument(self, name, base):
        p = self.packuments.get(name)
        if p is None:
            return None
        p = json.loads(json.dumps(p))
        for m in p["versions"].values():
            m["dist"]["tarball"] = base + m["dist"]["tarball"]
        return p


def serve(directory, port=0, log=None):
    """Starts the registry on 127.0.0.1 in a thread; returns the server."""
    registry = Registry(directory)
    log_file = open(log, "a", buffering=1) if log else None

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status, body, kind):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            if log_file:
                log_file.write(f"{self.command} {self.path} {status}\n")

        def do_GET(self):
            path = urllib.parse.urlsplit(self.path).path
            if path in registry.tarballs:
                return self.reply(200, registry.tarballs[path], "application/octet-stream")
            name = urllib.parse.unquote(path.lstrip("/"))
            base = f"http://{self.headers.get('Host', '127.0.0.1')}"
            p = registry.packument(name, base)
            if p is not None:
                return self.reply(200, json.dumps(p).encode(), "application/json")
            self.reply(404, b'{"error":"Not found"}', "application/json")

        def do_POST(self):
            # npm audit and friends: nothing to say.
            self.reply(404, b'{"error":"Not found"}', "application/json")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    a = ap.parse_args()
    server = serve(a.dir, a.port, a.log)
    print(f"port {server.server_address[1]}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
