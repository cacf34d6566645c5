#!/usr/bin/env python3
"""Traces through the real `midtier` binary (docs/operations.md, "Traces"): a stand-in OTLP/HTTP
collector (this script, decoding the protobuf export with the `opentelemetry-proto` package
from PyPI), the real sandbox as SuccessFactors behind a recording relay that keeps the headers
of every call Midtier makes to it (the token service and the OData service), and Midtier with
`tracing` pointing at the collector.

1. A proxied call that needs a token exchange: the collector receives one trace with the
   device request's server span as the root and its children (registration lookup,
   authenticate, admission, token with the token exchange under it, back-end call, answer);
   the spans carry the route, app, destination, status and the back end's address.
2. The device's `traceparent` is continued: the same trace id, the device's span as the
   parent of Midtier's; the answer's `traceresponse` names the trace and Midtier's span.
3. The back end and the token service receive a `traceparent` of this trace whose parent is
   Midtier's span of that call (back-end call, token exchange).
4. A call with no `traceparent` starts a trace of its own; its log lines carry its trace id.
5. Nothing secret leaves: the collector's capture holds none of the passwords, the
   registration's cookie, the access token or the device's headers' values.
6. Midtier's own routes (onboarding) are traced too.
7. A collector that is down costs no request an error: every call still answers 200.
8. `check-config` refuses a bad `tracing` section naming the key.

Usage: tracing.py PATH-TO-MIDTIER. Prints `tracing: N passed, M failed`; exits 1 on failure.
"""
import base64, http.server, json, os, shutil, socketserver, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.request
from harness import Checks, basic, demo_config, free_port, kill_all, start_sandbox_and_midtier, wait_for, labelled
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
processes = []
check = Checks("tracing")


class Collected:
    lock = threading.Lock()
    spans = []        # dicts: name, kind, trace, span, parent, attrs, status, service
    raw = []          # every export's bytes (searched for secrets)
    relayed = []      # (path, headers dict) of what Midtier sent to the back end / token service


class Collector(http.server.BaseHTTPRequestHandler):
    """OTLP/HTTP: POST /v1/traces, protobuf."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with Collected.lock:
            Collected.raw.append(body)
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get("service.name")
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        attrs = {}
                        for a in span.attributes:
                            value = a.value
                            attrs[a.key] = value.string_value if value.HasField("string_value") else value.int_value if value.HasField("int_value") else str(value)
                        Collected.spans.append({"name": span.name, "kind": span.kind, "trace": span.trace_id.hex(), "span": span.span_id.hex(),
                                                "parent": span.parent_span_id.hex(), "attrs": attrs, "status": span.status.code,
                                                "service": service, "path": self.path})
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def relay_to(sandbox_port):
    class Relay(http.server.BaseHTTPRequestHandler):
        """Passes every call on to the sandbox, keeping what Midtier sent."""
        protocol_version = "HTTP/1.1"

        def relay(self, method):
            length = int(self.headers.get("Content-Length", 0) or 0)
            body = self.rfile.read(length) if length else None
            with Collected.lock:
                Collected.relayed.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            # (The Host stays: the sandbox checks the assertion's Recipient against it.)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "content-length")}
            request = urllib.request.Request(f"http://127.0.0.1:{sandbox_port}{self.path}", data=body, method=method, headers=headers)
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            try:
                with opener.open(request, timeout=20) as response:
                    status, answer_headers, answer = response.status, response.headers, response.read()
            except urllib.error.HTTPError as error:
                status, answer_headers, answer = error.code, error.headers, error.read()
            self.send_response(status)
            for name, value in answer_headers.items():
                if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def do_GET(self):
            self.relay("GET")

        def do_POST(self):
            self.relay("POST")

        def log_message(self, *args):
            pass
    return Relay


def serve(handler):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def call(port, method, path, headers=None, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=labelled(headers, body))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def spans_of(trace_id, at_least, seconds=30):
    """The spans of `trace_id` the collector has, once it has `at_least` (exports are batched)."""
    deadline = time.time() + seconds
    while True:
        with Collected.lock:
            found = [span for span in Collected.spans if span["trace"] == trace_id]
        if len(found) >= at_least or time.time() > deadline:
            return found
        time.sleep(0.2)


def main():
    work = tempfile.mkdtemp(prefix="midtier-tracing-")
    try:
        collector = serve(Collector)
        cport = collector.server_address[1]
        sport, mport, aport = free_port(), free_port(), free_port()
        relay = serve(relay_to(sport))
        rport = relay.server_address[1]
        tracing = {"endpoint": f"http://127.0.0.1:{cport}/v1/traces", "samplingRatio": 1, "serviceName": "midtier-e2e"}
        config = demo_config(REPO, work, mport, aport, tracing=tracing)
        destination = os.path.join(config, "destinations", "sf.json")
        sf = json.load(open(destination))
        sf.update({"URL": f"http://127.0.0.1:{rport}", "tokenServiceURL": f"http://127.0.0.1:{rport}/oauth/token"})
        json.dump(sf, open(destination, "w"))

        # 8. check-config names what is wrong in `tracing`.
        for bad, key in [({"samplingRatio": 0.5}, "endpoint"), ({"endpoint": "ftp://x/v1/traces"}, "endpoint"),
                         ({"endpoint": "http://c:4318/v1/traces", "samplingRatio": 2}, "samplingRatio"),
                         ({"endpoint": "http://c:4318/v1/traces", "serviceName": ""}, "serviceName"),
                         ({"endpoint": "http://c:4318/v1/traces", "sampling": 1}, "sampling")]:
            bad_config = os.path.join(work, "bad-config")
            shutil.rmtree(bad_config, ignore_errors=True)
            shutil.copytree(config, bad_config)
            settings = json.load(open(os.path.join(bad_config, "midtier.json")))
            settings["tracing"] = bad
            json.dump(settings, open(os.path.join(bad_config, "midtier.json"), "w"))
            result = subprocess.run([BIN, "check-config", "--config", bad_config], cwd=REPO, capture_output=True, text=True, timeout=60)
            output = result.stdout + result.stderr
            check(f"check-config refuses tracing {json.dumps(bad)} naming tracing.{key}",
                       result.returncode != 0 and f"tracing.{key}" in output, output.strip()[-300:])

        midtier, log_path = start_sandbox_and_midtier(BIN, REPO, work, config, sport, processes)
        wait_for(f"http://127.0.0.1:{mport}/healthz")
        wait_for(f"http://127.0.0.1:{sport}/sandbox/stats")

        alice = {"Authorization": basic("alice", "alice-demo-password")}
        # 6. Onboarding is traced (Midtier's own route).
        status, headers, body = call(mport, "POST", "/odata/applications/v1/demo/Connections", alice, b"{}")
        appcid = headers.get("x-smp-appcid", "")
        check("onboarding answers 201 with a traceresponse", status == 201 and headers.get("traceresponse", "").startswith("00-"),
                   f"{status} {headers.get('traceresponse')}")
        onboarding_trace = headers.get("traceresponse", "00-x-x-00").split("-")[1]
        onboarding = spans_of(onboarding_trace, 1)
        check("the onboarding's server span reaches the collector with its route",
                   any(s["kind"] == 2 and s["attrs"].get("http.route") == "/odata" and s["attrs"].get("http.response.status_code") == 201
                       for s in onboarding), onboarding)

        # 1-3. A proxied call continuing the device's trace; its token comes from an exchange.
        device_trace, device_span = os.urandom(16).hex(), os.urandom(8).hex()
        traceparent = f"00-{device_trace}-{device_span}-01"
        with Collected.lock:
            Collected.relayed.clear()
        status, headers, body = call(mport, "GET", "/sf/odata/v2/User('100001')?$format=json",
                                     {**alice, "X-SMP-APPCID": appcid, "traceparent": traceparent, "tracestate": "vendor=opaque"})
        check("the proxied call answers 200", status == 200, f"{status} {body[:200]!r}")
        traceresponse = headers.get("traceresponse", "")
        parts = traceresponse.split("-")
        check("traceresponse continues the device's trace id", len(parts) == 4 and parts[1] == device_trace, traceresponse)
        midtier_span = parts[2] if len(parts) == 4 else ""
        spans = spans_of(device_trace, 9)
        by_name = {}
        for span in spans:
            by_name.setdefault(span["name"], []).append(span)
        root = [s for s in spans if s["span"] == midtier_span]
        check("the device request's server span has the device's span as its parent",
                   len(root) == 1 and root[0]["parent"] == device_span and root[0]["kind"] == 2, root)
        if root:
            attrs = root[0]["attrs"]
            check("the request span names method, route, app, destination and status",
                       attrs.get("http.request.method") == "GET" and attrs.get("http.route") == "/{destination}/*"
                       and attrs.get("midtier.app") == "demo" and attrs.get("midtier.destination") == "sf"
                       and attrs.get("http.response.status_code") == 200, attrs)
            check("the spans are exported under the configured service name", root[0]["service"] == "midtier-e2e", root[0]["service"])
        children = {name: [s for s in group if s["parent"] == midtier_span] for name, group in by_name.items()}
        for name in ["registration lookup", "authenticate", "admission", "token", "backend call", "answer"]:
            check(f"'{name}' is a child of the request span", len(children.get(name, [])) == 1, sorted(by_name))
        authenticate = (children.get("authenticate") or [{}])[0].get("attrs", {})
        check("authenticate says how the credential was checked", authenticate.get("midtier.authentication") == "basic"
                   and authenticate.get("midtier.credential") in ("remembered", "verified"), authenticate)
        token = (children.get("token") or [{}])[0]
        check("the token span records the cache outcome", token.get("attrs", {}).get("midtier.token.cache") in ("miss", "hit", "wait"), token)
        exchanges = [s for s in by_name.get("token exchange", []) if s["parent"] == token.get("span")]
        check("the token exchange is a client span under the token span", len(exchanges) == 1 and exchanges[0]["kind"] == 3, by_name.get("token exchange"))
        backend = (children.get("backend call") or [{}])[0]
        check("the back-end call is a client span with the back end's address, status and size",
                   backend.get("kind") == 3 and backend.get("attrs", {}).get("server.address") == "127.0.0.1"
                   and backend.get("attrs", {}).get("server.port") == rport and backend.get("attrs", {}).get("http.response.status_code") == 200
                   and isinstance(backend.get("attrs", {}).get("http.response.body.size"), int), backend)

        with Collected.lock:
            relayed = list(Collected.relayed)
        odata = [h for path, h in relayed if path.startswith("/odata/")]
        oauth = [h for path, h in relayed if path.startswith("/oauth/token")]
        check("the back end receives a traceparent of this trace naming the back-end call's span",
                   len(odata) == 1 and odata[0].get("traceparent") == f"00-{device_trace}-{backend.get('span')}-01", odata)
        check("the back end receives the device's tracestate", len(odata) == 1 and odata[0].get("tracestate") == "vendor=opaque", odata)
        check("the token service receives a traceparent naming the token exchange's span",
                   len(oauth) == 1 and exchanges and oauth[0].get("traceparent") == f"00-{device_trace}-{exchanges[0]['span']}-01", oauth)

        # 4. No traceparent: a trace of its own; the request's log lines carry its id.
        status, headers, _ = call(mport, "GET", "/sf/odata/v2/User('100001')?$format=json", {**alice, "X-SMP-APPCID": appcid})
        own = headers.get("traceresponse", "").split("-")
        check("a call without traceparent gets a new trace", status == 200 and len(own) == 4 and own[1] != device_trace and len(own[1]) == 32,
                   headers.get("traceresponse"))
        status, headers, _ = call(mport, "GET", "/sf/odata/v2/User('100001')", {**alice, "X-SMP-APPCID": "unknown-registration"})
        refused = headers.get("traceresponse", "").split("-")
        check("a refused call carries a traceresponse too", status == 403 and len(refused) == 4, f"{status} {headers.get('traceresponse')}")
        # (A request's log lines are written before its answer.)
        lines = [json.loads(line) for line in open(log_path) if line.startswith("{")]
        exchanged = [line for line in lines if line.get("message") == "token exchanged"]
        check("the token exchange's log line carries the device request's trace id",
              len(exchanged) == 1 and exchanged[0].get("trace_id") == device_trace, exchanged)
        registered = [line for line in lines if line.get("message") == "device registered"]
        check("the onboarding's log line carries its trace id", len(registered) == 1 and registered[0].get("trace_id") == onboarding_trace, registered)
        started = [line for line in lines if "Server started" in line.get("message", "")]
        check("log lines outside requests carry no trace id", len(started) == 2 and all("trace_id" not in line for line in started), started)

        # 5. Nothing secret in anything exported.
        # Everything searched has been exported: the spans of the last traced call have arrived.
        last = spans_of(own[1] if len(own) == 4 else "", 7)  # (its token was cached: no exchange)
        check("the last call's spans reached the collector before the search", len(last) >= 7, len(last))
        with Collected.lock:
            capture = b"".join(Collected.raw)
        secrets = {"alice's password": b"alice-demo-password", "the Basic credential": alice["Authorization"].split(" ")[1].encode(),
                   "the registration id": appcid.encode(), "the user id": b"alice", "the SuccessFactors user": b"100001"}
        for name, value in secrets.items():
            if value:
                check(f"the export holds no {name}", value not in capture, name)
        check("the export holds no bearer token", b"Bearer" not in capture and b"Basic" not in capture)
        check("the collector received the exports at /v1/traces", all(s["path"] == "/v1/traces" for s in Collected.spans))

        # 7. The collector goes away: requests still answer.
        collector.shutdown()
        collector.server_close()
        codes = [call(mport, "GET", "/sf/odata/v2/User('100001')?$format=json", {**alice, "X-SMP-APPCID": appcid})[0] for _ in range(30)]
        check("with the collector down every call still answers 200", codes == [200] * 30, codes)
        check("midtier is still running", midtier.poll() is None)

        # 8. SIGTERM stops Midtier cleanly with tracing on: the exporter is shut down by the
        #    service group, and nothing of OpenTelemetry's is torn down on an event loop
        #    (swift-otel's exporter shuts its HTTP client down synchronously when released,
        #    which AsyncHTTPClient refuses there by stopping the process).
        midtier.terminate()
        try:
            code = midtier.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = None
        output = open(log_path, errors="replace").read()
        check("SIGTERM stops midtier with exit code 0", code == 0, f"exit code {code}: {output[-600:]}")
        check("midtier logs that it stopped, and no crash", '"midtier stopped"' in output and "crashed" not in output
              and "Fatal error" not in output, output[-600:])
    finally:
        kill_all(processes)
        shutil.rmtree(work, ignore_errors=True)
    check.finish()


if __name__ == "__main__":
    main()
