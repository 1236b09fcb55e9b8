"""The Docker image, checked without a Docker daemon (none runs on the test machines): it installs every
extra the proxy's documented flags need, and its entrypoint runs the proxy as an unprivileged user that
can write the capture volume, whoever owns the mounted directory. The entrypoint script runs for real."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from prefixguard.cli import proxy

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "docker-entrypoint.sh"
# The proxy's flags the README documents for the container, and the package each needs at run time.
FLAG_NEEDS = {"--metrics-port": "prometheus-client", "--otlp-endpoint": "opentelemetry-sdk",
              "--index": "redis", "--store": "psycopg"}   # --store postgresql://...


def installed_extras() -> set[str]:
    text = (ROOT / "Dockerfile").read_text()
    (extras,) = re.findall(r"pip install '\.\[([\w,]+)\]'", text)
    return set(extras.split(","))


def test_the_image_installs_what_every_documented_flag_needs() -> None:
    flags = {o for p in proxy.proxy.params for o in (*p.opts, *p.secondary_opts)}
    assert set(FLAG_NEEDS) <= flags
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    brought = {re.split(r"[\[<>=]", dep)[0] for name in installed_extras() for dep in extras[name]}
    assert set(FLAG_NEEDS.values()) <= brought, set(FLAG_NEEDS.values()) - brought
    readme = (ROOT / "README.md").read_text()
    for flag in ("--metrics-port", "--otlp-endpoint", "--index"):
        assert flag in readme


def run_entrypoint(data: Path, *command: str, as_uid: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFIXGUARD_DATA": str(data)}
    prefix = [] if as_uid is None else ["setpriv", f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups"]
    return subprocess.run([*prefix, "sh", str(ENTRYPOINT), *command], env=env, capture_output=True, text=True,
                          timeout=30)


WRITE = ("sh", "-c", 'touch "$PREFIXGUARD_DATA/capture.db" && id -u')


@pytest.fixture()
def tmp_path() -> Iterator[Path]:
    """A directory other users can reach, as / is in the image (pytest's own is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="pg-docker-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_started_as_root_it_gives_the_volume_to_its_user_and_drops_root(tmp_path: Path) -> None:
    """A bind mount owned by root (or any host user) the proxy's uid cannot write: the entrypoint hands it
    over, then runs the command as uid 10001. (Where the tests run unprivileged, the other branch.)"""
    data = tmp_path / "captures"
    data.mkdir(mode=0o755)
    if os.geteuid() != 0:
        done = run_entrypoint(data, *WRITE)
        assert done.returncode == 0 and done.stdout.strip() == str(os.geteuid()), done.stderr
        return
    done = run_entrypoint(data, *WRITE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "10001"                      # the command no longer runs as root
    assert (data / "capture.db").stat().st_uid == 10001 and data.stat().st_uid == 10001
    # a directory the user can write already is left as it is
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o1777)
    assert run_entrypoint(open_dir, *WRITE).returncode == 0 and open_dir.stat().st_uid == 0


def test_run_as_another_user_it_writes_or_says_why_in_one_line(tmp_path: Path) -> None:
    """`docker run --user UID:GID`: the directory's owner writes; anyone else gets one line and exit 2."""
    data = tmp_path / "captures"
    data.mkdir(mode=0o755)
    uid = 20002 if os.geteuid() == 0 else None
    if uid is not None:
        os.chown(data, uid, uid)
    done = run_entrypoint(data, *WRITE, as_uid=uid)
    assert done.returncode == 0 and (data / "capture.db").exists(), done.stderr
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    if uid is None:   # unprivileged: the directory is read-only to its owner too
        done = run_entrypoint(locked, *WRITE)
    else:
        done = run_entrypoint(locked, *WRITE, as_uid=uid)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.count("\n") == 1 and "is not writable by uid" in done.stderr and "--user" in done.stderr
