"""Fixtures: one embedded engine (real local model) shared by the session, a fresh tenant per
test (tenants are fully isolated), and a `memwarden serve` subprocess for the remote tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

import memwarden

REPO = Path(__file__).resolve().parents[2]


def model_dir() -> str:
    d = os.environ.get("MEMWARDEN_MODEL_DIR") or str(REPO / "models" / "all-MiniLM-L6-v2")
    if not Path(d, "model.safetensors").is_file():
        pytest.exit(f"the local model is not in {d}: run scripts/fetch-model.sh", returncode=2)
    return d


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("memwarden-data")


@pytest.fixture(scope="session")
def engine(data_dir: Path) -> memwarden.Engine:
    return memwarden.Engine.open(data_dir, model_dir=model_dir())


@pytest.fixture
def tenant() -> str:
    return "t-" + uuid.uuid4().hex[:12]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memwarden_binary() -> str:
    exe = os.environ.get("MEMWARDEN_BIN") or str(REPO / "target" / "debug" / "memwarden")
    if not Path(exe).is_file():
        found = shutil.which("memwarden")
        if found is None:
            pytest.exit(f"no memwarden binary at {exe}: cargo build -p memwarden (or set MEMWARDEN_BIN)", returncode=2)
        exe = found
    return exe


class Server:
    """A `memwarden serve` on a loopback port over its own data directory."""

    def __init__(self, data: Path, tenant: str = "acme"):
        self.data = data
        self.tenant = tenant
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.exe = memwarden_binary()
        self.env = dict(os.environ, MEMWARDEN_DATA=str(data), MEMWARDEN_TENANT=tenant, MEMWARDEN_MODEL_DIR=model_dir(), RUST_LOG="warn")
        self.proc: "subprocess.Popen[bytes] | None" = None
        self.keys: dict = {}

    def cli(self, *args: str) -> str:
        out = subprocess.run([self.exe, *args], env=self.env, capture_output=True, check=True, timeout=120)
        return out.stdout.decode()

    def principal(self, id: str, kind: str, *extra: str) -> None:
        self.cli("principal", "add", "--id", id, "--kind", kind, *extra)

    def key(self, principal: str) -> str:
        """Mint an API key (before `start`: the CLI opens the data directory itself)."""
        import json

        token = str(json.loads(self.cli("key", "mint", "--as", principal))["token"])
        self.keys[principal] = token
        return token

    def user_secret(self, user: str) -> str:
        return Path(self.data, "user-keys", self.tenant, f"{user}.ed25519").read_text().strip()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "serve", "--addr", f"127.0.0.1:{self.port}", "--rate-per-sec", "0"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"memwarden serve exited: {self.proc.stderr.read().decode() if self.proc.stderr else ''}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("memwarden serve did not become ready in 60 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("server-data"))
    for pid, kind, *extra in [
        ("alice", "user"),
        ("assistant", "agent"),
        ("mallory", "agent"),
        ("mail-inbox", "source", "--domain", "mail.acme.example"),
    ]:
        s.principal(pid, kind, *extra)
        s.key(pid)
    s.start()
    try:
        yield s
    finally:
        s.stop()
