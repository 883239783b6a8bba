"""A private PostgreSQL server for tests that must configure the server (TLS on, scram
passwords, pg_hba rules, killing connections), so the shared server is never touched.
It runs from a temporary directory on a free port, with a CA, server and client
certificates made here with `cryptography`."""

from __future__ import annotations

import datetime as dt
import glob
import ipaddress
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SUPERUSER_PASSWORD = "private-admin-pw"
CERT_USER = "rota_cert_user"  # authenticates with a client certificate, no password


def find_bin() -> Path | None:
    """The folder with initdb and pg_ctl: $ROTA_TEST_PG_BIN, the PATH, or Debian's."""
    if os.environ.get("ROTA_TEST_PG_BIN"):
        return Path(os.environ["ROTA_TEST_PG_BIN"])
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return Path(candidates[0]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)  # libpq and the server refuse keys others can read


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    issuer_key: ec.EllipticCurvePrivateKey | None,
    *,
    ca: bool = False,
    hosts: bool = False,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key or key, hashes.SHA256())


def make_certificates(folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate for
    CERT_USER, all signed by the CA."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("rota test CA", ca_key, None, None, ca=True)
    paths = {"ca": folder / "ca.crt"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for role, subject, hosts in (("server", "localhost", True), ("client", CERT_USER, False)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(subject, key, ca.subject, ca_key, hosts=hosts)
        paths[role] = folder / f"{role}.crt"
        paths[role].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths[f"{role}_key"] = folder / f"{role}.key"
        _write_key(paths[f"{role}_key"], key)
    return paths


@dataclass
class PrivatePostgres:
    root: Path
    port: int
    certs: dict[str, Path]
    _as_postgres: list[str]
    _bin: Path

    def url(
        self,
        user: str = "postgres",
        password: str | None = SUPERUSER_PASSWORD,
        *,
        host: str = "127.0.0.1",
        database: str = "postgres",
        **params: str,
    ) -> str:
        auth = user if password is None else f"{user}:{quote(password, safe='')}"
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
        return f"postgresql://{auth}@{host}:{self.port}/{database}" + (f"?{query}" if query else "")

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url(sslmode="require"), autocommit=True)

    def stop(self) -> None:
        subprocess.run(
            [
                *self._as_postgres,
                str(self._bin / "pg_ctl"),
                "-D",
                str(self.root / "data"),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start() -> PrivatePostgres:
    """initdb, certificates, pg_hba and a started server (about two seconds)."""
    bin_dir = find_bin()
    if bin_dir is None:
        raise FileNotFoundError("initdb not found (install postgresql or set ROTA_TEST_PG_BIN)")
    root = Path(tempfile.mkdtemp(prefix="rota-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        # The server refuses to run as root: run it as the postgres user.
        as_postgres = ["runuser", "-u", "postgres", "--"]
    certs_dir = root / "certs"
    certs_dir.mkdir()
    certs = make_certificates(certs_dir)
    server_dir = root / "server"
    server_dir.mkdir()
    for name in ("ca", "server", "server_key"):
        target = server_dir / certs[name].name
        shutil.copy(certs[name], target)
        target.chmod(0o600 if name == "server_key" else 0o644)
    (root / "pw").write_text(SUPERUSER_PASSWORD + "\n")
    if as_postgres:
        root.chmod(0o755)
        for path in (root / "pw", server_dir, *server_dir.iterdir()):
            shutil.chown(path, "postgres", "postgres")
    data = root / "data"
    data.mkdir(mode=0o700)
    sockets = root / "sock"
    sockets.mkdir()
    if as_postgres:
        shutil.chown(data, "postgres", "postgres")
        shutil.chown(sockets, "postgres", "postgres")
    subprocess.run(
        [
            *as_postgres,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            f"--pwfile={root / 'pw'}",
            "--auth=scram-sha-256",
            "--no-sync",
            "--no-instructions",
            "-E",
            "UTF8",
            "--locale=C",
        ],
        capture_output=True,
        check=True,
        timeout=120,
    )
    # Only TLS connections from 127.0.0.1: a client certificate for CERT_USER, a scram
    # password for everyone else; anything without TLS is rejected.
    (data / "pg_hba.conf").write_text(
        f"hostssl all {CERT_USER} 127.0.0.1/32 cert\n"
        "hostssl all all 127.0.0.1/32 scram-sha-256\n"
        "host all all 127.0.0.1/32 reject\n"
    )
    port = _free_port()
    options = " ".join(
        [
            f"-p {port}",
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={sockets}",
            "-c ssl=on",
            f"-c ssl_cert_file={server_dir / 'server.crt'}",
            f"-c ssl_key_file={server_dir / 'server.key'}",
            f"-c ssl_ca_file={server_dir / 'ca.crt'}",
            "-c fsync=off",
            "-c synchronous_commit=off",
            "-c full_page_writes=off",
            "-c shared_buffers=16MB",
            "-c max_connections=60",
        ]
    )
    subprocess.run(
        [
            *as_postgres,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(sockets / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ],
        capture_output=True,
        check=True,
        timeout=90,
    )
    server = PrivatePostgres(root, port, certs, as_postgres, bin_dir)
    deadline = time.monotonic() + 10
    while True:
        try:
            with server.admin() as conn:
                conn.execute(f'CREATE ROLE "{CERT_USER}" LOGIN')
            return server
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                server.stop()
                raise
            time.sleep(0.1)
