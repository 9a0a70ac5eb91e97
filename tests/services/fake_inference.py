"""A fake inference server for the service tests (tests/tests/service_rollout.rs,
service_autoscale.rs) and the endpoint benchmark: it answers like a slow model server and
exposes its queue as vLLM does.

Environment:
  PORT      the port to listen on (127.0.0.1), given by Gantry
  VERSION   what it answers with (default "v1")
  DELAY_S   seconds one request takes once it has a slot (default 0.05)
  SLOTS     requests served at once; the others wait in the queue (default 4)
  BROKEN    when set, /health answers 503: the replica never becomes healthy

Routes:
  /v1/completions  (GET or POST) waits for a slot, sleeps DELAY_S, answers
                   {"version": VERSION, "pid": PID}
  /metrics         vllm:num_requests_waiting and vllm:num_requests_running, Prometheus text
  /health          200, or 503 when BROKEN
  /pid             the process id
"""

import http.server
import json
import os
import threading
import time

PORT = int(os.environ["PORT"])
VERSION = os.environ.get("VERSION", "v1")
DELAY_S = float(os.environ.get("DELAY_S", "0.05"))
SLOTS = threading.Semaphore(int(os.environ.get("SLOTS", "4")))
BROKEN = bool(os.environ.get("BROKEN"))

lock = threading.Lock()
waiting = 0
running = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, body, kind="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def complete(self):
        global waiting, running
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with lock:
            waiting += 1
        with SLOTS:
            with lock:
                waiting -= 1
                running += 1
            time.sleep(DELAY_S)
            with lock:
                running -= 1
        self.answer(200, json.dumps({"version": VERSION, "pid": os.getpid()}))

    def do_GET(self):
        if self.path.startswith("/v1/completions"):
            self.complete()
        elif self.path == "/metrics":
            with lock:
                text = (
                    "# TYPE vllm:num_requests_waiting gauge\n"
                    f'vllm:num_requests_waiting{{model_name="fake"}} {waiting}\n'
                    "# TYPE vllm:num_requests_running gauge\n"
                    f'vllm:num_requests_running{{model_name="fake"}} {running}\n'
                )
            self.answer(200, text, "text/plain; version=0.0.4")
        elif self.path == "/health":
            self.answer(503 if BROKEN else 200, "broken" if BROKEN else "ok", "text/plain")
        elif self.path == "/pid":
            self.answer(200, str(os.getpid()), "text/plain")
        else:
            self.answer(404, json.dumps({"error": "no such route"}))

    def do_POST(self):
        if self.path.startswith("/v1/completions"):
            self.complete()
        else:
            self.answer(404, json.dumps({"error": "no such route"}))

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


Server(("127.0.0.1", PORT), Handler).serve_forever()
