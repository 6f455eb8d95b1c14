"""The package as a user gets it: built as a wheel and an sdist, installed into a fresh virtual
environment outside the repository with only its core dependencies, running the README's drop-in
example offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Any connection that leaves the machine fails in the example's process.
OFFLINE = """
import ipaddress, socket

_connect = socket.socket.connect


def _local_only(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            local = ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = host == "localhost"
        if not local:
            raise OSError(f"network access to {host} is not allowed here")
    return _connect(self, address)


socket.socket.connect = _local_only
"""


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``: the sdist, then the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT, cwd=ROOT)
    return out


def test_the_wheel_holds_the_package_and_nothing_else(dist: Path) -> None:
    [wheel] = dist.glob("ctx_langgraph-*-py3-none-any.whl")
    [sdist] = dist.glob("ctx_langgraph-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ctx_langgraph/__init__.py" in names and "ctx_langgraph/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "notebooks/"))]
    assert not [n for n in names if "_tiktoken_cache" in n]  # seeded at run time
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))
    )
    assert b"Provides-Extra: postgres" in metadata
    assert sdist.stat().st_size < 5_000_000  # no virtual environment or data inside


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_drop_in_example_offline(
    dist: Path, tmp_path: Path
) -> None:
    [wheel] = dist.glob("ctx_langgraph-*-py3-none-any.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run(python, "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)

    # only the core dependencies: the extras' packages are not there
    missing = _run(
        python,
        "-c",
        "import importlib.util as u; print([m for m in ('psycopg', 'langmem', 'matplotlib', "
        "'pytest', 'langchain_openai') if u.find_spec(m)])",
        cwd=tmp_path,
    )
    assert missing.strip() == "[]"

    readme = (ROOT / "README.md").read_text()
    drop_in = readme.split("## Drop it into your agent", 1)[1]
    example = re.search(r"```python\n(.*?)```", drop_in, flags=re.S)
    assert example is not None
    guard = tmp_path / "offline"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(OFFLINE)
    (tmp_path / "example.py").write_text(example.group(1) + '\nprint("drop-in example ok")\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "TIKTOKEN", "VIRTUAL_ENV", "CTX_"))
    }
    env["PYTHONPATH"] = str(guard)
    probe = "import socket; socket.create_connection(('192.0.2.1', 443), timeout=1)"
    blocked = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert "network access to 192.0.2.1 is not allowed" in blocked.stderr  # the guard is on
    out = _run(python, "example.py", cwd=tmp_path, env=env)
    assert "drop-in example ok" in out

    # the command line comes with the wheel, and PostgreSQL names the extra it needs
    cli = env_dir / "bin" / "ctx-langgraph"
    assert "history-demo" in _run(cli, "--help", cwd=tmp_path, env=env)
    done = subprocess.run(
        [str(python), "-c", "import ctx_langgraph as c; c.PostgresHistoryStore('postgresql://x')"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "ctx-langgraph[postgres]" in done.stderr
