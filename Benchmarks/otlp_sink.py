#!/usr/bin/env python3
"""A collector stand-in for `make bench`: accepts OTLP/HTTP trace exports on 127.0.0.1:PORT
(any path), answers each with an empty protobuf response, and counts the exports and their
bytes (written to FILE on SIGTERM). It decodes nothing: the measure is Midtier's cost.

Usage: otlp_sink.py PORT FILE"""
import http.server, signal, socketserver, sys, threading

exports = [0, 0]
lock = threading.Lock()


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0) or 0)
        self.rfile.read(length)
        with lock:
            exports[0] += 1
            exports[1] += length
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = socketserver.ThreadingTCPServer(("127.0.0.1", int(sys.argv[1])), Sink)
server.daemon_threads = True


def stop(*_):
    with open(sys.argv[2], "w") as out:
        out.write(f"exports {exports[0]} bytes {exports[1]}\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
server.serve_forever()
