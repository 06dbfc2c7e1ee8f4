"""A test image with the reference MCP servers from PyPI (mcp-server-git, mcp-server-time),
built offline on top of planrun's sandbox image and cached by a content tag."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SERVERS = ("mcp-server-git", "mcp-server-time")
WHEEL_CACHE = Path(tempfile.gettempdir()) / "planrun-test-mcp-wheels"
REPOSITORY = "planrun-test-mcp"
DOCKERFILE = """\
FROM {base}
USER root
COPY wheels /tmp/wheels
RUN python3 /tmp/wheels/{pip}/pip install --no-index --no-cache-dir --find-links /tmp/wheels \\
        --prefix /usr/local {servers} \\
    && rm -rf /tmp/wheels
# Debian's python3 reads /usr/local's dist-packages, where pip's --prefix does not write.
ENV PYTHONPATH=/usr/local/lib/python3.11/site-packages
USER {user}
"""


def download_wheels(target: Path = WHEEL_CACHE) -> list[Path]:
    """The servers' wheels (and pip's, to install them) for the image's Python 3.11,
    downloaded once on the host: the image build itself has no network."""
    wheels = sorted(target.glob("*.whl"))
    if any(w.name.startswith("mcp_server_git-") for w in wheels) and any(
        w.name.startswith("pip-") for w in wheels
    ):
        return wheels
    target.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"]
    command = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:"]
    command += ["--python-version", "3.11", "-d", str(target)]
    for platform in platforms:
        command += ["--platform", platform]
    subprocess.run([*command, *SERVERS, "pip"], check=True, capture_output=True)
    return sorted(target.glob("*.whl"))


def mcp_image(base: str) -> str:
    """The tag of the test image on BASE, built when missing (offline: --network none)."""
    wheels = download_wheels()
    base_id = _output("docker", "image", "inspect", "-f", "{{.Id}}", base)
    digest = hashlib.sha256((base_id + DOCKERFILE).encode())
    for wheel in wheels:
        digest.update(wheel.name.encode())
    tag = f"{REPOSITORY}:{digest.hexdigest()[:12]}"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    user = _output("docker", "image", "inspect", "-f", "{{.Config.User}}", base) or "root"
    pip = next(w.name for w in wheels if w.name.startswith("pip-"))
    with tempfile.TemporaryDirectory() as context:
        shutil.copytree(WHEEL_CACHE, Path(context) / "wheels")
        text = DOCKERFILE.format(base=base, pip=pip, servers=" ".join(SERVERS), user=user)
        (Path(context) / "Dockerfile").write_text(text)
        subprocess.run(
            ["docker", "build", "--network", "none", "-q", "-t", tag, context],
            check=True,
            capture_output=True,
        )
    return tag


def _output(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()
