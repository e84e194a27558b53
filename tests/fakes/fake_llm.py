#!/usr/bin/env python3
"""A stand-in for LLM providers in tests: a real HTTP server on loopback that
answers with a scripted list of responses, in order, and records every request.

    fake_llm.py --port 0 --script responses.json --log requests.jsonl [--events events.jsonl]

--port 0 picks a free port; the port is the first line on stdout.
The script is a JSON array; each entry:
    {"status": 200, "headers": {"Retry-After": "2"},
     "body": <any JSON, sent as JSON> | "raw": "<sent as is>",
     "delay_s": 0.5, "body_delay_s": 3, "auto_usage": true}
delay_s: before anything is sent; body_delay_s: after the status line and
headers, before the body (an answer that has begun to arrive).
auto_usage: the answer's prompt tokens are the request's bytes / 4 (a
stand-in tokenizer, so budgets meet prompts that grow as real ones do).
"$LAST_CANDIDATE" anywhere in a body (a JSON string, or inside the JSON text
of OpenAI tool arguments) becomes the last "candidate N" id the request
carries (the evaluate tool's answer), so a script can commit what it made.
Once the script runs out, every request gets 500 {"error": "script
exhausted"}, or with --loop the script starts over.

Requests are checked as the real services check them: an assistant turn
with nothing in it (Anthropic: empty content; OpenAI: null content without
tool_calls) is refused with 400, and so is max_tokens in an OpenAI body
when --refuse-max-tokens is given (newer OpenAI models want
max_completion_tokens).
Each request is logged (when it arrives, before any delay) as one JSON line:
{"t", "method", "path", "headers", "body", "rejected"}, with the values of
Authorization and x-api-key replaced by "REDACTED" so keys never land in
test logs.
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
import re
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_HEADERS = {"authorization", "x-api-key"}


def invalid(path, body, refuse_max_tokens):
    """Why the real service would refuse this request with 400, or None."""
    try:
        req = json.loads(body)
    except ValueError:
        return "the body is not JSON"
    anthropic = path.endswith("/messages")
    if not anthropic and refuse_max_tokens and "max_tokens" in req:
        return ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.")
    for i, m in enumerate(req.get("messages", [])):
        if m.get("role") != "assistant":
            continue
        c = m.get("content")
        if anthropic and (c in ("", []) or c is None):
            return f"messages.{i}: all messages must have non-empty content"
        if not anthropic and c is None and not m.get("tool_calls"):
            return f"messages[{i}]: an assistant message needs content or tool_calls"
    return None


def answer(resp, body):
    """The response entry with its late-bound parts filled from the request."""
    if not resp.get("auto_usage") and "$LAST_CANDIDATE" not in json.dumps(resp.get("body", "")):
        return resp
    resp = json.loads(json.dumps(resp))
    out = resp.get("body", {})
    if resp.get("auto_usage"):
        u = out.get("usage", {})
        u["input_tokens" if "input_tokens" in u else "prompt_tokens"] = len(body) // 4
    ids = re.findall(r"candidate (\d+): outcome", body)
    text = json.dumps(out)
    text = text.replace('\\"$LAST_CANDIDATE\\"', ids[-1] if ids else "0")
    text = text.replace('"$LAST_CANDIDATE"', ids[-1] if ids else "0")
    resp["body"] = json.loads(text)
    return resp


class Fake:
    def __init__(self, script, log_path, events_path, loop, refuse_max_tokens):
        self.script = script
        self.next = 0
        self.requests = 0
        self.loop = loop
        self.refuse_max_tokens = refuse_max_tokens
        self.lock = threading.Lock()
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.events = open(events_path, "a", encoding="utf-8") if events_path else None

    def take(self, record):
        """Log the request and pick its response, atomically, so the log order
        is the order responses were handed out. Returns (n, response)."""
        why = invalid(record["path"], record["body"], self.refuse_max_tokens)
        with self.lock:
            self.requests += 1
            record["t"] = time.time()
            record["rejected"] = why
            if self.log:
                self.log.write(json.dumps(record) + "\n")
                self.log.flush()
            if why:
                return self.requests, {"status": 400, "body": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": why}}}
            if self.loop and self.script and self.next >= len(self.script):
                self.next = 0
            if self.next < len(self.script):
                self.next += 1
                return self.requests, answer(self.script[self.next - 1], record["body"])
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
    ap.add_argument("--loop", action="store_true", help="start the script over once it runs out")
    ap.add_argument("--refuse-max-tokens", action="store_true",
                    help="refuse max_tokens in OpenAI bodies, as newer OpenAI models do")
    args = ap.parse_args()
    script = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.fake = Fake(script, args.log, args.events, args.loop, args.refuse_max_tokens)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
