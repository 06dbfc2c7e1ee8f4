"""What a sandbox is made of: its profile, mounts and limits (its container options are in
container_options.py, the checks of its host directories in host_paths.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from sandbox_runner.limits import Limits
from sandbox_runner.paths import EXTRA_MOUNT_ROOT, PLAN_MOUNT, WORKSPACE_MOUNT

# Re-exported: the CLI and runs/ import it from here.
from sandbox_runner.sandbox.host_paths import resolve_workspace as resolve_workspace

# The tool server is a package directory, started as one: `python3 -I -S TOOLSERVER_MOUNT`.
TOOLSERVER_MOUNT = "/opt/planrun/toolserver"
# The directory of the host's walk of the workspace for the git guard
# (host_walk/shared.py), read-only.
GIT_SEED_MOUNT = "/opt/planrun/git-seed"
GIT_SEED_FILE = f"{GIT_SEED_MOUNT}/seed.json"
"""The seed in its directory (host_walk/shared.py writes it there, or `none`)."""
RESOLV_CONF_MOUNT = "/etc/resolv.conf"
DEFAULT_PYTHON = "python3"


class Profile(StrEnum):
    """What a sandbox is for, which decides where it may write."""

    PLAN = "plan"
    """The workspace read-only; /plan a kernel-capped tmpfs copied out to the host plan
    directory. A Plan subagent's sandbox."""
    WORK = "work"
    """The workspace writable; otherwise hardened like a plan sandbox (network only when
    granted); /tmp allows exec. What an interactive work session runs in."""
    PROBE = "probe"
    """Read-only, with no host-backed writable place: the before/after git-status checks."""


@dataclass(frozen=True)
class Mount:
    """A host directory bind-mounted into the sandbox."""

    source: Path
    """The directory on the host."""
    target: str
    """Where it appears inside the sandbox (an absolute path)."""
    writable: bool = False
    """Whether the sandbox may change it (a work sandbox's workspace only)."""


# Places in the container the sandbox itself uses: a mount may not land on them.
RESERVED_TARGETS = frozenset(
    {PLAN_MOUNT, "/tmp", TOOLSERVER_MOUNT, RESOLV_CONF_MOUNT, GIT_SEED_MOUNT}
)


@dataclass(frozen=True)
class SandboxSpec:
    """Everything that decides how one sandbox's container is built.

    Build one with `SandboxSpec.plan`, `.work` or `.probe`; the fields say what each means.
    """

    mounts: tuple[Mount, ...]
    """Host directories mounted in the sandbox: exactly one at /workspace (the
    repository), and any others read-only, under /ro/<name>."""
    image: str
    """The sandbox image tag."""
    profile: Profile = Profile.PLAN
    plan_dir: Path | None = None
    """Where the host keeps what a plan sandbox wrote to /plan; only for Profile.PLAN.

    /plan itself is a tmpfs inside the container, capped by the kernel (bytes and
    entries); the host copies its files out, bounded and without following links. Work
    and probe sandboxes get a tiny /plan that is never copied out."""
    limits: Limits = field(default_factory=Limits)
    session: str = "adhoc"
    """Session id, stored as a label for `planrun sandbox gc`."""
    agent: str = "sandbox"
    """Agent name, stored as a label."""
    network: bool = False
    """Whether the sandbox may reach the network; only a work sandbox, when granted."""
    python: str = DEFAULT_PYTHON
    """The tool server's interpreter in the image: the image's python3, or planrun's
    runtime in an image derived from the user's (derived_image.RUNTIME_PYTHON)."""
    scratch: bool = False
    """A scratch run (plan sandboxes only): /workspace is the repository under a
    copy-on-write layer that commands may write, capped by the kernel and thrown away
    with the sandbox (sandbox/scratch.py); the repository itself is never written."""
    git_seed: Path | None = None
    """The directory where the host's walk of the workspace puts its seed
    (host_walk/shared.py), mounted read-only: the git guard waits for the seed and checks
    it instead of walking everything itself."""

    def __post_init__(self) -> None:
        targets = [mount.target for mount in self.mounts]
        if targets.count(WORKSPACE_MOUNT) != 1:
            raise ValueError(f"a sandbox needs exactly one mount at {WORKSPACE_MOUNT}")
        if len(set(targets)) != len(targets):
            raise ValueError(f"two mounts share a target: {sorted(targets)}")
        for target in targets:
            if not target.startswith("/") or target in RESERVED_TARGETS:
                raise ValueError(f"a mount cannot go to {target}")
        if self.profile is not Profile.WORK:
            if any(mount.writable for mount in self.mounts):
                raise ValueError(f"a {self.profile} sandbox mounts nothing writable")
            if self.network:
                raise ValueError(f"a {self.profile} sandbox has no network")
        if (self.plan_dir is not None) != (self.profile is Profile.PLAN):
            raise ValueError("a plan directory belongs to a plan sandbox, and only to one")
        if self.scratch and self.profile is not Profile.PLAN:
            raise ValueError("only a plan sandbox has a scratch layer")

    @classmethod
    def plan(
        cls,
        workspace: Path,
        plan_dir: Path,
        image: str,
        extra_dirs: tuple[Path, ...] = (),
        limits: Limits | None = None,
        *,
        session: str = "adhoc",
        agent: str = "sandbox",
        python: str = DEFAULT_PYTHON,
        scratch: bool = False,
        git_seed: Path | None = None,
    ) -> SandboxSpec:
        """A Plan subagent's sandbox: reads everything, writes only /plan (copied to
        plan_dir on the host); with scratch, commands also write a throw-away layer over
        the repository."""
        mounts = _mounts(workspace, extra_dirs, writable_workspace=False)
        return cls(
            mounts, image, Profile.PLAN, plan_dir, limits or Limits(),
            session=session, agent=agent, python=python, scratch=scratch, git_seed=git_seed,
        )  # fmt: skip

    @classmethod
    def work(
        cls,
        workspace: Path,
        image: str,
        extra_dirs: tuple[Path, ...] = (),
        limits: Limits | None = None,
        *,
        network: bool = False,
        session: str = "adhoc",
        agent: str = "sandbox",
        protected: tuple[str, ...] = (),
        python: str = DEFAULT_PYTHON,
    ) -> SandboxSpec:
        """A work sandbox: the workspace writable (as the sandbox user) but for its
        protected entries (relative paths, mounted read-only over it), extra directories
        read-only, no network unless granted."""
        mounts = _mounts(workspace, extra_dirs, writable_workspace=True)
        mounts += tuple(protected_mounts(workspace, protected))
        return cls(
            mounts,
            image,
            Profile.WORK,
            None,
            limits or Limits(),
            session=session,
            agent=agent,
            network=network,
            python=python,
        )

    @classmethod
    def probe(
        cls,
        workspace: Path,
        image: str,
        extra_dirs: tuple[Path, ...] = (),
        limits: Limits | None = None,
        *,
        session: str = "adhoc",
        agent: str = "git-status",
        python: str = DEFAULT_PYTHON,
        git_seed: Path | None = None,
    ) -> SandboxSpec:
        """A probe sandbox (the git-status checks): reads only, nothing reaches the host."""
        mounts = _mounts(workspace, extra_dirs, writable_workspace=False)
        return cls(
            mounts, image, Profile.PROBE, None, limits or Limits(),
            session=session, agent=agent, python=python, git_seed=git_seed,
        )  # fmt: skip

    @property
    def workspace(self) -> Path:
        """The repository on the host, mounted at /workspace."""
        return next(m.source for m in self.mounts if m.target == WORKSPACE_MOUNT)

    @property
    def extra_mounts(self) -> tuple[Mount, ...]:
        """The extra read-only directories, under /ro (not the workspace, nor what is
        mounted over parts of it)."""
        return tuple(m for m in self.mounts if m.target.startswith(EXTRA_MOUNT_ROOT + "/"))

    @property
    def extra_dirs(self) -> tuple[Path, ...]:
        """The host directories of the extra mounts."""
        return tuple(m.source for m in self.extra_mounts)


def _mounts(
    workspace: Path, extra_dirs: tuple[Path, ...], *, writable_workspace: bool
) -> tuple[Mount, ...]:
    # Here, not at the top: resolve_workspace is on the way to the session's prompt.
    from sandbox_runner.sandbox.git_mounts import clean_config_copies

    extras = [Mount(source, target) for source, target in extra_mount_points(extra_dirs)]
    configs = [Mount(copy, target) for copy, target in clean_config_copies(workspace)]
    return (Mount(workspace, WORKSPACE_MOUNT, writable_workspace), *extras, *configs)


def protected_mounts(workspace: Path, protected: tuple[str, ...]) -> list[Mount]:
    """Read-only mounts over a writable workspace's protected entries: the kernel refuses
    every write to them, whatever command runs (a mount point cannot be removed or
    renamed either)."""
    mounts = []
    for relative in protected:
        source = workspace / relative
        # A link is never mounted over: Docker would follow it, out of the workspace too.
        if ".." in Path(relative).parts or source.is_symlink() or not source.exists():
            continue
        mounts.append(Mount(source, f"{WORKSPACE_MOUNT}/{relative}"))
    return mounts


def extra_mount_points(extra_dirs: tuple[Path, ...]) -> list[tuple[Path, str]]:
    """Pair each extra directory with a unique /ro/<name> mount point."""
    used: set[str] = set()
    pairs = []
    for directory in extra_dirs:
        base = re.sub(r"[^A-Za-z0-9._-]", "_", directory.name) or "root"
        name, n = base, 2
        while name in used:
            name, n = f"{base}-{n}", n + 1
        used.add(name)
        pairs.append((directory, f"{EXTRA_MOUNT_ROOT}/{name}"))
    return pairs
