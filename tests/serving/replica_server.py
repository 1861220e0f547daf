"""A small model server, one replica of the test service: ``/health`` for readiness and
``/predict`` classifying an 8x8 digit with a fixed numpy MLP (64-128-10). ``FAIL_RATE`` makes
that share of predictions answer 500, ``EXTRA_MS`` delays each; every answer names the version
and the process, so the load generator can tell whose errors it saw."""

import json
import os
import random
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

PORT, VERSION = int(sys.argv[1]), os.environ.get("VERSION", "?")
FAIL_RATE = float(os.environ.get("FAIL_RATE", "0"))
EXTRA_MS = float(os.environ.get("EXTRA_MS", "0"))
rng = np.random.default_rng(0)
W1, W2 = rng.normal(size=(64, 128)) / 8, rng.normal(size=(128, 10)) / 11
DIGIT = rng.integers(0, 16, size=64).astype(float)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK

    def log_message(self, *args):
        pass

    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self._answer(200, {"ok": True})
            return
        if EXTRA_MS:
            time.sleep(EXTRA_MS / 1000)
        if random.random() < FAIL_RATE:
            self._answer(500, {"version": VERSION, "pid": os.getpid(), "error": "injected"})
            return
        digit = int(np.argmax(np.maximum(DIGIT @ W1, 0) @ W2))
        self._answer(200, {"version": VERSION, "pid": os.getpid(), "digit": digit})


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
