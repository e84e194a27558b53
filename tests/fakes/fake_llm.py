#!/usr/bin/env python3
"""A stand-in for LLM providers in tests: a real HTTP server on loopback that
answers with a scripted list of responses, in order, and records every request.

    fake_llm.py --port 0 --script responses.json --log requests.jsonl [--events events.jsonl]

--port 0 picks a free port; the port is the first line on stdout.
The script is a JSON array; each entry:
    {"status": 200, "headers": {"Retry-After": "2"},
     "body": <any JSON, sent as JSON> | "raw": "<sent as is>",
     "delay_s": 0.5, "body_delay_s": 3}
delay_s: before anything is sent; body_delay_s: after the status line and
headers, before the body (an answer that has begun to arrive).
Once it runs out, every request gets 500 {"error": "script exhausted"}.
Each request is logged (when it arrives, before any delay) as one JSON line:
{"method", "path", "headers", "body"}, with the values of Authorization and
x-api-key replaced by "REDACTED" so keys never land in test logs.
--events logs what happened to each request (n: its line in --log, from 1;
t: the wall clock, time.time()), one JSON line each:
    {"event": "headers", "n", "t"}        the status line and headers went out
    {"event": "served", "n", "t", "status", "in_tokens", "out_tokens"}
                                          the whole answer went out (tokens from
                                          its usage, either wire format; 0 if none)
    {"event": "disconnected", "n", "t", "waited_s"}
                                          the client closed the connection before
                                          the answer was complete (watched during
                                          the delays, so seen when it happens)
Standard library only.
"""
import argparse
import json
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_HEADERS = {"authorization", "x-api-key"}


class Fake:
    def __init__(self, script, log_path, events_path):
        self.script = script
        self.next = 0
        self.requests = 0
        self.lock = threading.Lock()
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.events = open(events_path, "a", encoding="utf-8") if events_path else None

    def take(self, record):
        """Log the request and pick its response, atomically, so the log order
        is the order responses were handed out. Returns (n, response)."""
        with self.lock:
            self.requests += 1
            if self.log:
                self.log.write(json.dumps(record) + "\n")
                self.log.flush()
            if self.next < len(self.script):
                self.next += 1
                return self.requests, self.script[self.next - 1]
        return self.requests, {"status": 500, "body": {"error": "script exhausted"}}

    def event(self, kind, n, **fields):
        if not self.events:
            return
        with self.lock:
            self.events.write(json.dumps({"event": kind, "n": n, "t": time.time(), **fields}) + "\n")
            self.events.flush()


def usage_tokens(body):
    """(input, output) tokens of an answer's usage, in either wire format."""
    u = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(u, dict):
        return 0, 0
    return (int(u.get("input_tokens", u.get("prompt_tokens", 0)) or 0),
            int(u.get("output_tokens", u.get("completion_tokens", 0)) or 0))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers do

    def wait(self, seconds):
        """Sleep, watching the connection: False as soon as the client has
        closed it (nothing else may arrive while it waits for the answer)."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return True
            readable, _, _ = select.select([self.connection], [], [], left)
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return False
                except (ConnectionResetError, OSError):
                    return False
                time.sleep(min(left, 0.05))  # pipelined bytes: not ours to read

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = {k: ("REDACTED" if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()}
        fake = self.server.fake
        num, resp = fake.take({
            "method": self.command,
            "path": self.path,
            "headers": headers,
            "body": body.decode("utf-8", errors="replace"),
        })
        t0 = time.time()
        if not self.wait(float(resp.get("delay_s", 0))):
            fake.event("disconnected", num, waited_s=round(time.time() - t0, 3))
            self.close_connection = True
            return
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
            fake.event("headers", num)
            if not self.wait(float(resp.get("body_delay_s", 0))):
                fake.event("disconnected", num, waited_s=round(time.time() - t0, 3))
                self.close_connection = True
                return
            self.wfile.write(payload)
            self.wfile.flush()
            i, o = usage_tokens(resp.get("body"))
            fake.event("served", num, status=int(resp.get("status", 200)), in_tokens=i, out_tokens=o)
        except (BrokenPipeError, ConnectionResetError):
            # the client gave up (its timeout): expected in tests
            fake.event("disconnected", num, waited_s=round(time.time() - t0, 3))
            self.close_connection = True

    do_POST = do_GET = do_PUT = do_DELETE = handle_any

    def log_message(self, fmt, *args):
        pass  # requests go to --log; stderr stays quiet


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--script", help="JSON array of responses")
    ap.add_argument("--log", help="append one JSON line per request")
    ap.add_argument("--events", help="append one JSON line per event of a request (headers, served, disconnected)")
    args = ap.parse_args()
    script = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.fake = Fake(script, args.log, args.events)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
