#!/usr/bin/env python3
"""A stand-in for LLM providers in tests: a real HTTP server on loopback that
answers with a scripted list of responses, in order, and records every request.

    fake_llm.py --port 0 --script responses.json --log requests.jsonl

--port 0 picks a free port; the port is the first line on stdout.
The script is a JSON array; each entry:
    {"status": 200, "headers": {"Retry-After": "2"},
     "body": <any JSON, sent as JSON> | "raw": "<sent as is>",
     "delay_s": 0.5}
Once it runs out, every request gets 500 {"error": "script exhausted"}.
Each request is logged (when it arrives, before any delay) as one JSON line:
{"method", "path", "headers", "body"}, with the values of Authorization and
x-api-key replaced by "REDACTED" so keys never land in test logs.
Standard library only.
"""
import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_HEADERS = {"authorization", "x-api-key"}


class Fake:
    def __init__(self, script, log_path):
        self.script = script
        self.next = 0
        self.lock = threading.Lock()
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None

    def take(self, record):
        """Log the request and pick its response, atomically, so the log order
        is the order responses were handed out."""
        with self.lock:
            if self.log:
                self.log.write(json.dumps(record) + "\n")
                self.log.flush()
            if self.next < len(self.script):
                self.next += 1
                return self.script[self.next - 1]
        return {"status": 500, "body": {"error": "script exhausted"}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers do

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = {k: ("REDACTED" if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()}
        resp = self.server.fake.take({
            "method": self.command,
            "path": self.path,
            "headers": headers,
            "body": body.decode("utf-8", errors="replace"),
        })
        time.sleep(float(resp.get("delay_s", 0)))
        if "raw" in resp:
            payload, ctype = resp["raw"].encode("utf-8"), "text/plain"
        else:
            payload, ctype = json.dumps(resp.get("body", {})).encode("utf-8"), "application/json"
        extra = resp.get("headers", {})
        try:
            self.send_response(int(resp.get("status", 200)))
            if not any(k.lower() == "content-type" for k in extra):
                self.send_header("Content-Type", ctype)
            for k, v in extra.items():
                self.send_header(k, str(v))
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): expected in tests

    do_POST = do_GET = do_PUT = do_DELETE = handle_any

    def log_message(self, fmt, *args):
        pass  # requests go to --log; stderr stays quiet


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--script", help="JSON array of responses")
    ap.add_argument("--log", help="append one JSON line per request")
    args = ap.parse_args()
    script = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.fake = Fake(script, args.log)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
