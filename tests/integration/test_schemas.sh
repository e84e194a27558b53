#!/usr/bin/env bash
# One source for the contracts (issue 22, point 7): the JSON Schemas in
# proto/schemas/ are valid draft 2020-12, proto/openapi.yaml uses them, every
# job spec example in docs/ and kernels/ and every kernels/**/problem.json
# passes them, and the same documents get the same answer from a real avod:
# each valid one accepted (POST /v1/jobs: 201), each invalid one in
# tests/schemas/invalid/ (one rule broken each) refused by the schema and by
# avod (400) alike. job-*.json go to POST /v1/jobs as they are; each
# problem-*.json becomes a package (with kernels/cpu/sgemm's reference.c and
# seed.c) under avod's kernels root that a job names, so avod's problem
# loader (proto/avo_problem.c) judges it. Also: a 405 carries an Allow header.
source "$(dirname "$0")/lib.sh"

python3 -c 'import jsonschema, yaml' 2>"$T/import.err"
check "python3 has jsonschema and yaml (make deps: python3-jsonschema, python3-yaml)" \
    bash -c '[ ! -s "$0" ]' "$T/import.err" || { cat "$T/import.err"; exit 1; }

# avod's kernels root: the shipped packages, plus one package per
# problem document of the corpus.
mkdir -p "$T/kernels/schemas"
for d in "$ROOT"/kernels/*/; do ln -s "$d" "$T/kernels/$(basename "$d")"; done
for f in "$ROOT"/tests/schemas/invalid/problem-*.json "$ROOT"/tests/schemas/valid/problem-*.json; do
    n=$(basename "$f" .json)
    mkdir -p "$T/kernels/schemas/$n"
    cp "$f" "$T/kernels/schemas/$n/problem.json"
    cp "$ROOT/kernels/cpu/sgemm/reference.c" "$ROOT/kernels/cpu/sgemm/seed.c" "$T/kernels/schemas/$n/"
done
# The agent examples name provider "claude": one that is configured (its
# address is never called: no job here gets as far as an agent step).
export AVO_TEST_KEY=not-a-real-key
cat >"$T/providers.json" <<'JSON'
[{"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:9", "model": "fake",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 0, "timeout_s": 5}]
JSON
check "avod starts" start_avod --kernels "$T/kernels" --providers "$T/providers.json"

python3 - "$ROOT" "$AVO_HOME/avod.sock" >"$T/schemas.out" 2>&1 <<'PY'
import glob, http.client, json, os, re, socket, sys
import jsonschema, yaml
root, sock = sys.argv[1], sys.argv[2]
S = f"{root}/proto/schemas"
job_schema = json.load(open(f"{S}/job-spec.schema.json"))
problem_schema = json.load(open(f"{S}/problem.schema.json"))
V = jsonschema.Draft202012Validator
for name, s in (("job-spec", job_schema), ("problem", problem_schema)):
    try:
        V.check_schema(s)
        print("OK schema", name, "is draft 2020-12")
    except jsonschema.SchemaError as e:
        print("FAIL schema", name, e.message)
jobv, probv = V(job_schema), V(problem_schema)

def first_error(v, doc):
    e = jsonschema.exceptions.best_match(v.iter_errors(doc))
    return None if e is None else f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:160]}"

# proto/openapi.yaml: the submit body is the job spec schema's file, the
# Problem component problem.json's; and, where openapi-spec-validator is
# installed, the whole document is a valid OpenAPI 3.1 one.
spec = yaml.safe_load(open(f"{root}/proto/openapi.yaml"))
def deref(node):  # follows local refs only: what is left is the external one
    while node.get("$ref", "").startswith("#/"):
        target = spec
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node
body = deref(spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"])
ok = spec.get("openapi", "").startswith("3.1") and \
    os.path.realpath(os.path.join(root, "proto", body.get("$ref", ""))) == os.path.realpath(f"{S}/job-spec.schema.json")
print(("OK" if ok else "FAIL"), "openapi POST /v1/jobs body is $ref to proto/schemas/job-spec.schema.json", body)
prob = spec["components"]["schemas"].get("Problem", {})
ok = os.path.realpath(os.path.join(root, "proto", prob.get("$ref", ""))) == os.path.realpath(f"{S}/problem.schema.json")
print(("OK" if ok else "FAIL"), "openapi components.schemas.Problem is $ref to proto/schemas/problem.schema.json")
try:
    from openapi_spec_validator import validate
    from openapi_spec_validator.readers import read_from_filename
    d, base = read_from_filename(f"{root}/proto/openapi.yaml")
    try:
        validate(d, base_uri=base)
        print("OK openapi document valid (openapi-spec-validator, $refs resolved)")
    except Exception as e:
        print("FAIL openapi document:", str(e)[:300])
except ImportError:
    print("SKIP openapi-spec-validator is not installed: the document's own validity is not checked")

# The valid documents: job spec examples in docs/ (a JSON object whose first
# member is "problem", in a code block or inline; one that does not parse is
# a failure, so a commented example cannot hide), the job specs of kernels/
# (campaign files: each of their jobs), tests/schemas/valid/.
jobs, problems = [], []
for md in sorted(glob.glob(f"{root}/docs/*.md")) + [f"{root}/README.md"]:
    text = open(md).read()
    rel = os.path.relpath(md, root)
    for m in re.finditer(r'\{\s*"problem"\s*:', text):
        line = text.count("\n", 0, m.start()) + 1
        try:
            doc, _ = json.JSONDecoder().raw_decode(text, m.start())
            jobs.append((f"{rel}:{line}", doc))
        except json.JSONDecodeError as e:
            print(f"FAIL doc example {rel}:{line} looks like a job spec but is not JSON ({e.msg})")
    for m in re.finditer(r'\{\s*"(description|backend)"\s*:', text):
        try:
            doc, _ = json.JSONDecoder().raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if "backend" in doc and "entry" in doc:
            line = text.count("\n", 0, m.start()) + 1
            problems.append((f"{rel}:{line}", doc, None))
print("COUNT docs job specs", len(jobs), [w for w, _ in jobs])
for f in sorted(glob.glob(f"{root}/kernels/**/*.json", recursive=True)):
    rel = os.path.relpath(f, root)
    doc = json.load(open(f))
    if os.path.basename(f) == "problem.json":
        problems.append((rel, doc, os.path.relpath(os.path.dirname(f), f"{root}/kernels")))
    elif "problem" in doc:
        jobs.append((rel, doc))
    elif isinstance(doc.get("jobs"), list):
        jobs += [(f"{rel} jobs[{i}]", j) for i, j in enumerate(doc["jobs"])]
for f in sorted(glob.glob(f"{root}/tests/schemas/valid/job-*.json")):
    jobs.append((os.path.relpath(f, root), json.load(open(f))))
for f in sorted(glob.glob(f"{root}/tests/schemas/valid/problem-*.json")):
    problems.append((os.path.relpath(f, root), json.load(open(f)), "schemas/" + os.path.basename(f)[:-5]))
print("COUNT jobs", len(jobs), "problems", len(problems))

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock)
def call(method, path, body=None):
    c = Unix("avod", timeout=30)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, {}
def submit(body):
    st, ans = call("POST", "/v1/jobs", body)
    if st == 201:
        call("POST", f"/v1/jobs/{ans['id']}/cancel")  # nothing here is meant to run
    return st, ans.get("error", {}).get("message", "")

for where, doc in jobs:
    err = first_error(jobv, doc)
    print(("OK" if err is None else "FAIL"), "valid job schema", where, err or "")
    st, msg = submit(json.dumps(doc))
    print(("OK" if st == 201 else "FAIL"), "valid job avod", where, st, msg)
for where, doc, pkg in problems:
    err = first_error(probv, doc)
    print(("OK" if err is None else "FAIL"), "valid problem schema", where, err or "")
    if pkg is None:
        continue  # a docs example: the files it names are not there
    st, msg = submit(json.dumps({"problem": pkg, "budget": {"evaluations": 1}, "priority": -9}))
    print(("OK" if st == 201 else "FAIL"), "valid problem avod", where, st, msg)

# The invalid corpus: each refused by both.
for f in sorted(glob.glob(f"{root}/tests/schemas/invalid/*.json")):
    name = os.path.basename(f)[:-5]
    raw = open(f, "rb").read()
    doc = json.loads(raw)
    if name.startswith("job-"):
        err = first_error(jobv, doc)
        st, msg = submit(raw)
        print(("OK" if err else "FAIL"), "invalid job schema", name, err)
        print(("OK" if st == 400 else "FAIL"), "invalid job avod", name, st, msg)
    elif name.startswith("problem-"):
        err = first_error(probv, doc)
        st, msg = submit(json.dumps({"problem": f"schemas/{name}", "budget": {"evaluations": 1}, "priority": -9}))
        print(("OK" if err else "FAIL"), "invalid problem schema", name, err)
        # refused by the loader itself: its message names problem.json
        print(("OK" if st == 400 and "problem.json" in msg else "FAIL"), "invalid problem avod", name, st, msg)
    else:
        print("FAIL invalid corpus file is neither job-* nor problem-*:", name)
PY
grep -v "^OK" "$T/schemas.out" | head -40
[ -n "${VERBOSE:-}" ] && cat "$T/schemas.out"
check "the schemas are valid draft 2020-12 schemas" \
    bash -c '[ "$(grep -c "^OK schema" "$0")" = 2 ]' "$T/schemas.out"
check "proto/openapi.yaml is OpenAPI 3.1 and takes the job spec and problem.json from proto/schemas/" \
    bash -c '[ "$(grep -c "^OK openapi" "$0")" -ge 2 ] && ! grep -q "^FAIL openapi" "$0"' "$T/schemas.out"
check "every job spec example in docs/ is JSON (no comments, no ellipses); at least the 6 of jobs.md, agent.md, cli.md, operations.md" \
    bash -c '! grep -q "^FAIL doc example" "$0" && [ "$(sed -n "s/^COUNT docs job specs \([0-9]*\).*/\1/p" "$0")" -ge 6 ]' "$T/schemas.out"
check "every job spec example (docs/, kernels/, tests/schemas/valid) passes the schema" \
    bash -c '[ "$(grep -c "^OK valid job schema" "$0")" -ge 8 ] && ! grep -q "^FAIL valid job schema" "$0"' "$T/schemas.out"
check "avod accepts every one of them" \
    bash -c '[ "$(grep -c "^OK valid job avod" "$0")" -ge 8 ] && ! grep -q "^FAIL valid job avod" "$0"' "$T/schemas.out"
check "every kernels/**/problem.json (and the valid corpus) passes the schema" \
    bash -c '[ "$(grep -c "^OK valid problem schema" "$0")" -ge 6 ] && ! grep -q "^FAIL valid problem schema" "$0"' "$T/schemas.out"
check "avod's problem loader accepts every one of them" \
    bash -c '[ "$(grep -c "^OK valid problem avod" "$0")" -ge 6 ] && ! grep -q "^FAIL valid problem avod" "$0"' "$T/schemas.out"
n_job=$(ls "$ROOT"/tests/schemas/invalid/job-*.json | wc -l)
n_prob=$(ls "$ROOT"/tests/schemas/invalid/problem-*.json | wc -l)
check "the schema refuses each of the $n_job invalid job specs" \
    bash -c '[ "$(grep -c "^OK invalid job schema" "$0")" = "$1" ]' "$T/schemas.out" "$n_job"
check "avod refuses each of them (400)" \
    bash -c '[ "$(grep -c "^OK invalid job avod" "$0")" = "$1" ]' "$T/schemas.out" "$n_job"
check "the schema refuses each of the $n_prob invalid problem.json" \
    bash -c '[ "$(grep -c "^OK invalid problem schema" "$0")" = "$1" ]' "$T/schemas.out" "$n_prob"
check "avod's problem loader refuses each of them (400 naming problem.json)" \
    bash -c '[ "$(grep -c "^OK invalid problem avod" "$0")" = "$1" ] && ! grep -q "^FAIL invalid corpus" "$0"' \
    "$T/schemas.out" "$n_prob"

# 405: the Allow header lists the methods the path takes (RFC 9110).
curl -s -i --unix-socket "$AVO_HOME/avod.sock" -X DELETE http://avod/v1/jobs/1 | tr -d '\r' >"$T/405a"
curl -s -i --unix-socket "$AVO_HOME/avod.sock" -X PUT http://avod/v1/jobs | tr -d '\r' >"$T/405b"
check "a 405 answers with Allow: the path's methods (DELETE /v1/jobs/1: GET; PUT /v1/jobs: POST, GET)" \
    bash -c 'head -1 "$0" | grep -q " 405" && grep -qi "^allow: GET$" "$0" &&
             head -1 "$1" | grep -q " 405" && grep -qi "^allow: POST, GET$" "$1" &&
             grep -q "method_not_allowed" "$1"' "$T/405a" "$T/405b"
[ "$FAILS" -eq 0 ]
