"""A private nginx on 127.0.0.1 for tests and benchmarks, started and stopped by pid.
The one place its configuration is written; shell scripts use `nginxctl.py conf ROOT DIR`.

    with Nginx(root, workdir, servers=...) as n:  n.port, n.url("repos/v1/manifest.json")

`servers` adds server blocks (format fields: {port}, {root}, and any in `ports`); the first
server, on `port`, serves `root` with `locations` inside it."""
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_conf(root, workdir, locations="", servers="", http="", ports=(), access_log="off", port=None):
    """Writes workdir/nginx.conf; returns (port, {name: port}) for the main and named servers.
    `port`: the main server's port, when the caller must know it before the start."""
    port = port or free_port()
    named = {name: free_port() for name in ports}
    os.makedirs(f"{workdir}/tmp", exist_ok=True)
    fields = dict(port=port, root=root, dir=workdir, **named)
    user = "user root;" if os.geteuid() == 0 else ""
    temp = " ".join(f"{k}_temp_path {workdir}/tmp;" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = f"""{user}
worker_processes 1;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 256; }}
http {{
  {http.format(**fields)}
  access_log {access_log};
  default_type application/octet-stream;
  {temp}
  server {{
    listen 127.0.0.1:{port};
    root {root};
    {locations.format(**fields)}
  }}
  {servers.format(**fields)}
}}
"""
    with open(f"{workdir}/nginx.conf", "w") as f:
        f.write(conf)
    return port, named


class Nginx:
    def __init__(self, root, workdir, locations="", servers="", http="", ports=(), access_log="off", port=None):
        self.dir = workdir
        self.root = root
        self.port, self.ports = write_conf(root, workdir, locations, servers, http, ports, access_log, port)
        self.proc = subprocess.Popen(["/usr/sbin/nginx", "-p", workdir, "-c", f"{workdir}/nginx.conf", "-e", f"{workdir}/error.log"])
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1)
                return
            except urllib.error.HTTPError:
                return  # it answers (403/404 for the root): up
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("nginx exited: " + open(f"{workdir}/error.log").read())
                time.sleep(0.05)
        raise RuntimeError("nginx did not come up")

    def url(self, path, port=None):
        return f"http://127.0.0.1:{port or self.port}/{path}"

    def stop(self):
        """A graceful stop (SIGQUIT): requests under way finish and are logged, so a test that
        reads the access log after the stop sees every request its client made."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    # nginxctl.py conf ROOT WORKDIR [LOCATIONS]: write the configuration, print the port.
    import sys
    if len(sys.argv) < 4 or sys.argv[1] != "conf":
        sys.exit("usage: nginxctl.py conf ROOT WORKDIR [LOCATIONS]")
    print(write_conf(sys.argv[2], sys.argv[3], locations=sys.argv[4] if len(sys.argv) > 4 else "")[0])
