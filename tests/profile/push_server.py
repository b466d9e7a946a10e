#!/usr/bin/env python3
"""A loopback HTTP server that takes profile pushes and decodes them with real
decoders, for tests/profile/test_push.c.

  push_server.py DIR [--script 500,200] [--hang] [--requests N] [--deadline S]

Binds 127.0.0.1 on a free port and writes it to DIR/port. Each request gets
the next status of --script (the last one repeats; default 200). With --hang
it reads the request and never answers. Every request is logged to DIR/log as
"METHOD PATH?QUERY content-type STATUS", its body kept as DIR/body-N.

A 2xx answer to /v1development/profiles parses the body as an OTLP
ExportProfilesServiceRequest (opentelemetry-proto) and writes DIR/summary;
a 2xx answer to /ingest hands the body to `go tool pprof -raw` and writes
DIR/summary from its output (and DIR/summary-N for request N, from 0).
Summary lines: "total N", "incl NAME N",
"self NAME N", "thread NAME N", "attr KEY VALUE", "time NS", "period NS",
"query KEY VALUE", and "error TEXT" for anything malformed.

Stops after --requests requests (default 1), --deadline seconds (30), or
once the file DIR/stop exists."""
import collections
import http.server
import os
import subprocess
import sys
import threading
import time
import urllib.parse


def summarize_otlp(body):
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc

    req = svc.ExportProfilesServiceRequest()
    req.ParseFromString(body)
    d = req.dictionary
    out, errors = [], []
    strings = list(d.string_table)
    if not strings or strings[0] != "":
        errors.append("string_table[0] is not empty")
    for name in ("mapping_table", "location_table", "function_table", "attribute_table", "stack_table"):
        table = getattr(d, name)
        if not len(table) or table[0].ByteSize() != 0:
            errors.append(f"{name}[0] is not the zero entry")

    def s(i):
        if not 0 <= i < len(strings):
            errors.append(f"string index {i} out of range")
            return "?"
        return strings[i]

    def func_name(i):
        if not 0 < i < len(d.function_table):
            errors.append(f"function index {i} out of range")
            return "?"
        return s(d.function_table[i].name_strindex)

    if len(req.resource_profiles) != 1:
        errors.append(f"{len(req.resource_profiles)} resource profiles")
    incl, self_, threads = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0
    for rp in req.resource_profiles:
        for kv in rp.resource.attributes:
            out.append(f"attr {kv.key} {kv.value.string_value}")
        for sp in rp.scope_profiles:
            out.append(f"scope {sp.scope.name}")
            for prof in sp.profiles:
                out.append(f"sample_type {s(prof.sample_type.type_strindex)}/{s(prof.sample_type.unit_strindex)}")
                out.append(f"period_type {s(prof.period_type.type_strindex)}/{s(prof.period_type.unit_strindex)}")
                out.append(f"time {prof.time_unix_nano}")
                out.append(f"duration {prof.duration_nano}")
                out.append(f"period {prof.period}")
                for smp in prof.samples:
                    if len(smp.values) != 1:
                        errors.append(f"sample with {len(smp.values)} values")
                        continue
                    v = smp.values[0]
                    total += v
                    if not 0 <= smp.stack_index < len(d.stack_table):
                        errors.append(f"stack index {smp.stack_index} out of range")
                        continue
                    names = []
                    for li in d.stack_table[smp.stack_index].location_indices:
                        if not 0 < li < len(d.location_table):
                            errors.append(f"location index {li} out of range")
                            continue
                        loc = d.location_table[li]
                        if not 0 <= loc.mapping_index < len(d.mapping_table):
                            errors.append(f"mapping index {loc.mapping_index} out of range")
                        names.extend(func_name(line.function_index) for line in loc.lines)
                    if names:
                        self_[names[0]] += v
                    for n in set(names):
                        incl[n] += v
                    tname = None
                    for ai in smp.attribute_indices:
                        if not 0 < ai < len(d.attribute_table):
                            errors.append(f"attribute index {ai} out of range")
                            continue
                        a = d.attribute_table[ai]
                        if s(a.key_strindex) == "thread.name":
                            tname = a.value.string_value
                    threads[tname or "?"] += v
    out.append(f"total {total}")
    out += [f"incl {k} {v}" for k, v in sorted(incl.items())]
    out += [f"self {k} {v}" for k, v in sorted(self_.items())]
    out += [f"thread {k} {v}" for k, v in sorted(threads.items())]
    out += [f"error {e}" for e in errors]
    return out


def summarize_pprof(path, work):
    env = dict(os.environ, HOME=work, GOCACHE=os.path.join(work, "gocache"),
               GOPATH=os.path.join(work, "gopath"), GOFLAGS="", GOTOOLCHAIN="local")
    r = subprocess.run(["go", "tool", "pprof", "-raw", path], capture_output=True, text=True,
                       env=env, timeout=120)
    if r.returncode != 0:
        return [f"error go tool pprof -raw failed: {r.stderr.strip()[:300]}"]
    lines = r.stdout.splitlines()
    out, samples, locs = [], [], {}
    section = None
    for ln in lines:
        if ln.startswith("Samples:"):
            section = "samples"
            continue
        if ln.startswith("Locations"):
            section = "locations"
            continue
        if ln.startswith("Mappings"):
            section = None
            continue
        if ln.startswith("PeriodType:"):
            out.append("period_type " + ln.split(":", 1)[1].strip().replace(" ", "/"))
        elif ln.startswith("Period:"):
            out.append("period " + ln.split(":", 1)[1].strip())
        if section == "samples" and ":" in ln:
            vals, ids = ln.split(":", 1)
            parts = vals.split()
            if parts and parts[0].isdigit():
                samples.append((int(parts[0]), [int(x) for x in ids.split()]))
        elif section == "locations" and ":" in ln and ln.strip()[0].isdigit():
            lid, rest = ln.split(":", 1)
            f = rest.split()
            # "0xADDR M=N name file:line s=N": the name follows M=.
            name = f[2] if len(f) > 2 and f[1].startswith("M=") else (f[1] if len(f) > 1 else "?")
            locs[int(lid)] = [name]
        elif section == "locations" and ln.startswith("             ") and locs:
            # An inline line of the last location: "name file:line s=N".
            last = max(locs)
            f = ln.split()
            if f:
                locs[last].insert(0, f[0])
    incl, self_ = collections.Counter(), collections.Counter()
    total = 0
    for v, ids in samples:
        total += v
        names = [n for i in ids for n in locs.get(i, ["?"])]
        if names:
            self_[names[0]] += v
        for n in set(names):
            incl[n] += v
    out.append(f"total {total}")
    out += [f"incl {k} {v}" for k, v in sorted(incl.items())]
    out += [f"self {k} {v}" for k, v in sorted(self_.items())]
    return out


def main():
    d = sys.argv[1]
    args = sys.argv[2:]
    script, hang, want, deadline = [200], False, 1, 30.0
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--script":
            script = [int(x) for x in args[i + 1].split(",")]
            i += 1
        elif a == "--hang":
            hang = True
        elif a == "--requests":
            want = int(args[i + 1])
            i += 1
        elif a == "--deadline":
            deadline = float(args[i + 1])
            i += 1
        i += 1
    served = [0]
    done = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            n = served[0]
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with open(os.path.join(d, f"body-{n}"), "wb") as f:
                f.write(body)
            if hang:
                done.wait(deadline)
                return
            status = script[min(n, len(script) - 1)]
            served[0] += 1
            url = urllib.parse.urlsplit(self.path)
            with open(os.path.join(d, "log"), "a") as f:
                f.write(f"POST {self.path} {self.headers.get('Content-Type')} {status}\n")
            summary = None
            if 200 <= status < 300:
                try:
                    if url.path == "/v1development/profiles":
                        summary = summarize_otlp(body)
                    elif url.path == "/ingest":
                        p = os.path.join(d, f"body-{n}.pb.gz")
                        os.rename(os.path.join(d, f"body-{n}"), p)
                        summary = summarize_pprof(p, d)
                    else:
                        summary = [f"error unexpected path {url.path}"]
                except Exception as e:  # a decoder's refusal is a finding
                    summary = [f"error decoding failed: {e!r}"]
                for k, vs in urllib.parse.parse_qs(url.query).items():
                    summary += [f"query {k} {v}" for v in vs]
                for name in (f"summary-{n}", "summary"):
                    tmp = os.path.join(d, "summary.tmp")
                    with open(tmp, "w") as f:
                        f.write("\n".join(summary) + "\n")
                    os.rename(tmp, os.path.join(d, name))
            msg = b"ok" if status < 400 else f"refused with {status}".encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            if served[0] >= want:
                done.set()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = os.path.join(d, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, os.path.join(d, "port"))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    end = time.monotonic() + deadline
    while not done.wait(0.1) and time.monotonic() < end:
        if os.path.exists(os.path.join(d, "stop")):
            break
    time.sleep(0.2)  # let the last answer leave
    srv.shutdown()


if __name__ == "__main__":
    main()
