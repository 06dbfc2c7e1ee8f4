"""Run once as root inside a derived image's build, under planrun's runtime python: what
planrun's own Dockerfile does, without a shell or any tool of the image.

It makes the sandbox's mount points, takes every setuid and setgid bit away (and `su`),
and names planrun's unprivileged user in /etc/passwd and /etc/group. The standard library
only: the image may have nothing else.
"""

from __future__ import annotations

import os
import stat

MOUNT_POINTS = ("/workspace", "/plan", "/ro", "/opt/planrun", "/tmp")
SANDBOX_UID = 10001
PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID
SKIPPED = ("/proc", "/sys", "/dev")


def make_mount_points() -> None:
    """The directories the sandbox mounts over (a read-only root cannot get them later)."""
    for path in MOUNT_POINTS:
        os.makedirs(path, exist_ok=True)
    os.chmod("/tmp", 0o1777)


def strip_privileges(root: str = "/") -> int:
    """Clear the setuid and setgid bits of every file on ROOT's file system, and remove
    `su`; return how many bits were cleared."""
    stripped = clear_privilege_bits(root)
    for su in ("/bin/su", "/usr/bin/su"):
        if os.path.lexists(su):
            os.remove(su)
    return stripped


def clear_privilege_bits(root: str) -> int:
    """Clear the setuid and setgid bits of every regular file on ROOT's file system (links
    not followed, /proc, /sys and /dev not entered); return how many."""
    device = os.lstat(root).st_dev
    stripped = 0
    # An explicit stack, as planrun's tree_walk (which cannot be imported here: this
    # script runs alone in the image): os.walk recurses once per level on Python 3.11.
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError:
            continue
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if entry.path not in SKIPPED and info.st_dev == device:
                    stack.append(entry.path)
            elif stat.S_ISREG(info.st_mode) and info.st_mode & PRIVILEGE_BITS:
                os.chmod(entry.path, stat.S_IMODE(info.st_mode) & ~PRIVILEGE_BITS)
                stripped += 1
    return stripped


def add_user() -> None:
    """Name the sandbox user (10001, as in planrun's image) unless its ids are taken."""
    os.makedirs("/etc", exist_ok=True)
    for path, line in (
        ("/etc/passwd", f"planrun:x:{SANDBOX_UID}:{SANDBOX_UID}::/nonexistent:/sbin/nologin\n"),
        ("/etc/group", f"planrun:x:{SANDBOX_UID}:\n"),
    ):
        entries = ""
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as file:
                entries = file.read()
        if f":{SANDBOX_UID}:" in entries:
            continue
        if not os.path.exists(path):
            entries = "root:x:0:0:root:/root:/bin/sh\n" if path == "/etc/passwd" else "root:x:0:\n"
        with open(path, "w", encoding="utf-8") as file:
            file.write(entries + ("" if entries.endswith("\n") or not entries else "\n") + line)


def main() -> None:
    make_mount_points()
    stripped = strip_privileges()
    add_user()
    print(f"planrun: mount points made, {stripped} setuid/setgid bits cleared, user {SANDBOX_UID}")


if __name__ == "__main__":
    main()
