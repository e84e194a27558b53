#!/usr/bin/env bash
# proto/openapi.yaml stays true: the routes avod serves (proto/avo_routes.h)
# and the paths it describes are the same set; a running avod answers every
# described operation with one of the status codes listed for it, every
# error body is an Error with a listed code; docs/api.md names every path;
# the list of jobs pages with ?before=; bad input gets its stable code.
source "$(dirname "$0")/lib.sh"

check "avod starts" start_avod
for i in 1 2 3; do avoctl --json submit --problem cpu/sgemm --evaluations 1 --priority -9 >/dev/null; done
curl -s --unix-socket "$AVO_HOME/avod.sock" -X POST -d '{"name": "note", "text": "wgmma needs sm_90a"}' http://avod/v1/kb >/dev/null

python3 - "$ROOT" "$AVO_HOME/avod.sock" >"$T/openapi.out" 2>&1 <<'PY'
import http.client, json, re, socket, sys, yaml
root, sock = sys.argv[1], sys.argv[2]
spec = yaml.safe_load(open(f"{root}/proto/openapi.yaml"))
routes = set()
for m in re.finditer(r'X\(\s*\w+\s*,\s*"(\w+)"\s*,\s*"([^"]+)"', open(f"{root}/proto/avo_routes.h").read()):
    routes.add((m.group(1), m.group(2)))
described = {(meth.upper(), path) for path, ops in spec["paths"].items() for meth in ops if meth in
             ("get", "post", "put", "delete", "patch")}
print("ROUTES", len(routes), "DESCRIBED", len(described))
for r in sorted(routes - described):
    print("FAIL served but not described:", *r)
for r in sorted(described - routes):
    print("FAIL described but not served:", *r)
codes = set(spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"])

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock)

def call(method, path, body=None, headers=None):
    c = Unix("avod", timeout=10)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read() if r.getheader("Content-Type", "").find("event-stream") < 0 else b""
    c.close()
    return r.status, r.getheader("Content-Type", ""), data

def check_error(status, ctype, data, what):
    if status < 400:
        return
    try:
        e = json.loads(data)["error"]
        assert e["code"] in codes and e["message"]
    except Exception as ex:
        print(f"FAIL {what}: error body is not an Error with a listed code: {data[:200]!r}")

bodies = {("POST", "/v1/jobs"): json.dumps({"problem": "cpu/sgemm", "budget": {"evaluations": 1}, "priority": -9}),
          ("POST", "/v1/kb"): json.dumps({"name": "n2", "text": "TMA loads complete on mbarriers"})}
queries = {"/v1/kb/search": "?q=wgmma", "/v1/jobs/{id}/events": "?after=999999"}
for path, ops in spec["paths"].items():
    for meth, op in ops.items():
        if meth not in ("get", "post"):
            continue
        url = path.replace("{id}", "1") + queries.get(path, "")
        if path.endswith("/events"):
            # A stream: only the status line and the content type.
            c = Unix("avod", timeout=10); c.request("GET", url); r = c.getresponse()
            st, ct = r.status, r.getheader("Content-Type", ""); c.close()
            ok = str(st) in op["responses"] and "text/event-stream" in ct
            print(("OK" if ok else "FAIL"), meth.upper(), url, st, ct)
            continue
        st, ct, data = call(meth.upper(), url, bodies.get((meth.upper(), path)),
                            {"Content-Type": "application/json"} if meth == "post" else None)
        ok = str(st) in op["responses"]
        print(("OK" if ok else "FAIL"), meth.upper(), url, st, ct.split(";")[0])
        check_error(st, ct, data, f"{meth.upper()} {url}")

# Bad input: each gets its stable code.
cases = [("GET", "/v1/nowhere", None, 404, "no_route"), ("DELETE", "/v1/jobs/1", None, 405, "method_not_allowed"),
         ("POST", "/v1/jobs", "{not json", 400, "bad_request"), ("POST", "/v1/jobs", "x" * (1 << 20 + 1), 413, "too_large"),
         ("GET", "/v1/jobs?limit=0", None, 400, "bad_request"), ("GET", "/v1/jobs?state=sleeping", None, 400, "bad_request"),
         ("GET", "/v1/jobs/999999", None, 404, "not_found")]
for meth, url, body, want, code in cases:
    st, ct, data = call(meth, url, body)
    got = json.loads(data).get("error", {}).get("code") if data.startswith(b"{") else None
    print(("OK" if (st, got) == (want, code) else "FAIL"), "bad input", meth, url[:40], st, got)

# Pagination: newest first, next_before continues, null on the last page.
seen, before, pages = [], None, 0
while pages < 10:
    st, ct, data = call("GET", "/v1/jobs?limit=2" + (f"&before={before}" if before else ""))
    page = json.loads(data)
    seen += [j["id"] for j in page["jobs"]]
    pages += 1
    before = page.get("next_before")
    if not before:
        break
total = json.loads(call("GET", "/v1/jobs?limit=1000")[2])["jobs"]
ok = seen == [j["id"] for j in total] and pages == (len(total) + 1) // 2
print(("OK" if ok else "FAIL"), "pagination", pages, "pages", seen)
st, ct, data = call("GET", "/v1/jobs?state=running")
print(("OK" if st == 200 and all(j["state"] == "running" for j in json.loads(data)["jobs"]) else "FAIL"), "state filter")

# Resuming a stream: ?after=N and the Last-Event-ID header give the same
# events, all after N. Job 1 has finished or is cancelled below, so its
# stream ends.
call("POST", "/v1/jobs/1/cancel")
def ids_from(url, headers=None):
    c = Unix("avod", timeout=10); c.request("GET", url, headers=headers or {}); r = c.getresponse()
    body = r.read().decode(); c.close()
    return [int(l[4:]) for l in body.splitlines() if l.startswith("id: ")]
all_ids = ids_from("/v1/jobs/1/events")
if len(all_ids) >= 2:
    a = ids_from(f"/v1/jobs/1/events?after={all_ids[0]}")
    b = ids_from("/v1/jobs/1/events", {"Last-Event-ID": str(all_ids[0])})
    print(("OK" if a == b == all_ids[1:] else "FAIL"), "resume", all_ids, a, b)
else:
    print("FAIL resume: too few events", all_ids)

api_md = open(f"{root}/docs/api.md").read()
for path in spec["paths"]:
    if f"`{path}`" not in api_md:
        print("FAIL docs/api.md does not name", path)
PY
cat "$T/openapi.out" | grep -v "^OK" | head -20
check "every served route is described in proto/openapi.yaml and every described path is served" \
    bash -c '! grep -q "FAIL served\|FAIL described" "$0" && grep -q "^ROUTES" "$0"' "$T/openapi.out"
check "avod answers each described operation with a listed status code; errors are Error bodies" \
    bash -c '[ "$(grep -c "^OK [A-Z]* /" "$0")" -ge 18 ] && ! grep -q "^FAIL [A-Z]* /\|^FAIL .*error body" "$0"' "$T/openapi.out"
check "bad input gets its stable code (no_route, method_not_allowed, bad_request, too_large, not_found)" \
    bash -c '[ "$(grep -c "^OK bad input" "$0")" = 7 ]' "$T/openapi.out"
check "the job list pages with ?before= (next_before, null on the last page) and filters by state" \
    bash -c 'grep -q "^OK pagination" "$0" && grep -q "^OK state filter" "$0"' "$T/openapi.out"
check "an event stream resumes after ?after=N and after a Last-Event-ID header alike" \
    grep -q "^OK resume" "$T/openapi.out"
check "docs/api.md names every path" bash -c '! grep -q "docs/api.md does not name" "$0"' "$T/openapi.out"
[ "$FAILS" -eq 0 ]
