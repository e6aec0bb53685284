#!/usr/bin/env python3
"""A scripted OTLP/HTTP receiver for the sender's tests: the status codes a collector answers with, on cue.

Usage: otlp_receiver.py DIR SCRIPT [PORT]
  DIR     where each POST is recorded: NNNN.body (the gunzipped body), NNNN.meta (path, headers, arrival time),
          and where "port" is written once listening on 127.0.0.1 (an ephemeral port).
  SCRIPT  the answers, in order, comma-separated; the last one repeats: 200, 400:<message>, 503:<retry-after s>,
          429, 502, 504, 500. A 400's message is sent as a google.rpc.Status (field 2), as a collector does.
  PORT    listen there (a receiver coming back where it was) instead of on an ephemeral port.
"""
import gzip
import http.server
import os
import sys
import time


def status_message(msg):
    data = msg.encode()
    return bytes([0x12, len(data)]) + data  # field 2 (message), length-delimited; messages < 128 bytes


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        srv = self.server
        n = srv.count
        srv.count += 1
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        with open(os.path.join(srv.dir, "%04d.body" % n), "wb") as f:
            f.write(body)
        with open(os.path.join(srv.dir, "%04d.meta" % n), "w") as f:
            f.write("path %s\ntime %.6f\n" % (self.path, time.monotonic()))
            for k, v in self.headers.items():
                f.write("header %s: %s\n" % (k.lower(), v))
        answer = srv.script[min(n, len(srv.script) - 1)]
        code, _, arg = answer.partition(":")
        code = int(code)
        payload = status_message(arg) if code == 400 else b""
        self.send_response(code)
        if code in (429, 503) and arg:
            self.send_header("Retry-After", arg)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def main():
    out, script = sys.argv[1], sys.argv[2].split(",")
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    srv = http.server.HTTPServer(("127.0.0.1", port), Receiver)
    srv.dir, srv.script, srv.count = out, script, 0
    tmp = os.path.join(out, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, os.path.join(out, "port"))
    srv.serve_forever()


if __name__ == "__main__":
    main()
