"""A throwaway PostgreSQL server for the tests: Debian's binaries, a cluster in a temporary folder owned
by an unprivileged user, listening on 127.0.0.1 on a free port, password (SCRAM) authentication over
TCP and TLS with a self-signed certificate.

Missing binaries are a failure, not a skip: `make test` installs Debian's `postgresql` when missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ADMIN = "spabench_admin"


def find_bindir() -> Path:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "pg_ctl").is_file() and Path(candidate, "initdb").is_file():
            return Path(candidate)
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql "
                       "package (`make test` does it when missing: apt-get install -y postgresql)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgCluster:
    root: Path
    port: int
    password: str
    user: str | None          # the OS user the server runs as (None: this process's user)
    bindir: Path
    durable: bool = False     # fsync on (benchmarks, to compare with SQLite's synchronous=FULL)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str = "postgres", role: str = ADMIN, **options: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"postgresql://{role}@127.0.0.1:{self.port}/{db}" + (f"?{query}" if query else "")

    def _as_owner(self, *cmd: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *cmd] if self.user else list(cmd)

    def run(self, *cmd: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self._as_owner(*cmd), check=True, capture_output=True, text=True, **kw)

    def start(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        self._chown(pwfile)
        self.run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", ADMIN, f"--pwfile={pwfile}",
                 "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        pwfile.unlink()
        self.run("openssl", "req", "-new", "-x509", "-days", "2", "-nodes", "-subj", "/CN=127.0.0.1",
                 "-keyout", str(self.data / "server.key"), "-out", str(self.data / "server.crt"))
        os.chmod(self.data / "server.key", 0o600)
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.root}'\nssl = on\n"
                       f"fsync = {'on' if self.durable else 'off'}\n"
                       "max_connections = 60\nshared_buffers = 16MB\n")
        self.run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"),
                 "-w", "-t", "60", "start")
        self._watchdog()

    def _watchdog(self) -> None:
        """Stop the server and remove its folder when this process dies, even by SIGKILL (a killed test
        run must not leave a server behind): a detached shell polls this process's pid."""
        stop = " ".join(shlex.quote(a) for a in self._as_owner(str(self.bindir / "pg_ctl"), "-D", str(self.data),
                                                                "-m", "immediate", "-w", "stop"))
        script = (f"while kill -0 {os.getpid()} 2>/dev/null && [ -d {shlex.quote(str(self.data))} ]; do sleep 1; done; "
                  f"{stop} >/dev/null 2>&1; rm -rf {shlex.quote(str(self.root))}")
        subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)

    def _chown(self, path: Path) -> None:
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def psql(self, sql: str, db: str = "postgres") -> str:
        """Run SQL as the admin over the cluster's Unix socket (trust for local connections)."""
        out = self.run(str(self.bindir / "psql"), "-h", str(self.root), "-p", str(self.port), "-U", ADMIN,
                       "-d", db, "-v", "ON_ERROR_STOP=1", "-Atc", sql)
        return out.stdout

    def pg_ctl(self, *args: str) -> None:
        """pg_ctl on this cluster, waiting for it to finish (fault injection: restart, stop, start)."""
        self.run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"),
                 "-w", "-t", "60", *args)

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster(durable: bool = False) -> PgCluster:
    bindir = find_bindir()
    user = None
    if os.geteuid() == 0:  # the server refuses to run as root
        for name in ("postgres", "nobody"):
            try:
                pwd.getpwnam(name)
                user = name
                break
            except KeyError:
                continue
        if user is None:
            raise RuntimeError("running as root and no unprivileged user (postgres, nobody) to own the test cluster")
    root = Path(tempfile.mkdtemp(prefix="spabench-pg-"))
    cluster = PgCluster(root=root, port=_free_port(), password=secrets.token_urlsafe(16), user=user, bindir=bindir,
                        durable=durable)
    if user:
        pw = pwd.getpwnam(user)
        os.chown(root, pw.pw_uid, pw.pw_gid)
        os.chmod(root, 0o700)
    try:
        cluster.start()
    except subprocess.CalledProcessError as exc:
        log = root / "server.log"
        detail = log.read_text()[-2000:] if log.is_file() else ""
        cluster.stop()
        raise RuntimeError(f"test PostgreSQL cluster failed to start: {exc.stderr or exc}\n{detail}") from None
    return cluster
