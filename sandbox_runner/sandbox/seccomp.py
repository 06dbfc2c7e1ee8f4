"""planrun's seccomp profile: Docker's default restrictions for a container without
capabilities, and more (io_uring, ptrace, process_vm_*, userfaultfd, memfd_create, rare
socket families and netlink protocols)."""

from __future__ import annotations

import functools
import json
import platform
from typing import Any

EPERM = 1
ENOSYS = 38

# Refused outright. Most need a capability the sandbox lacks anyway; refusing them here
# takes the kernel code behind them out of reach as well (Docker's default does the same
# for a container without capabilities), and the last group is planrun's own addition.
DENIED_SYSCALLS = (
    # Docker's default: module, mount, namespace, clock, key, swap and accounting calls.
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
    "delete_module", "fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen",
    "fspick", "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp",
    "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "mount",
    "mount_setattr", "move_mount", "move_pages", "name_to_handle_at", "nfsservctl",
    "open_by_handle_at", "open_tree", "perf_event_open", "pivot_root", "query_module",
    "quotactl", "quotactl_fd", "reboot", "request_key", "set_mempolicy", "setns",
    "settimeofday", "stime", "swapoff", "swapon", "_sysctl", "syslog", "sysfs", "umount",
    "umount2", "unshare", "uselib", "ustat", "vm86", "vm86old",
    # planrun's own: asynchronous I/O rings, reading or steering other processes, and
    # page-fault handling in user space (all favourite kernel attack surfaces).
    "io_uring_enter", "io_uring_register", "io_uring_setup", "pidfd_getfd",
    "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace", "userfaultfd",
    # An anonymous file that can be executed would make noexec on /tmp and /plan moot.
    "memfd_create",
)  # fmt: skip

# clone() may not make new namespaces (unshare and setns are refused above).
CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)

# Socket families a command may use: local sockets, IPv4 and IPv6 (loopback only, there
# is no network) and netlink (ip, ss). AF_VSOCK, AF_ALG, AF_PACKET and the rest are not.
ALLOWED_SOCKET_FAMILIES = frozenset({1, 2, 10, 16})  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
SOCKET_FAMILY_MAX = 45  # AF_MAX on current kernels; anything above is refused too
AF_NETLINK = 16
# Netlink for reading routes and sockets (ip, ss) only: not audit, netfilter, xfrm, uevents.
ALLOWED_NETLINK_PROTOCOLS = frozenset({0, 4})  # NETLINK_ROUTE, NETLINK_SOCK_DIAG
NETLINK_PROTOCOL_MAX = 31

ARCHITECTURES = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}


def _refuse(names: list[str], errno: int = EPERM, **rule: Any) -> dict[str, Any]:
    return {"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": errno, **rule}


def _arg(index: int, value: int, op: str, value_two: int = 0) -> dict[str, Any]:
    return {"index": index, "value": value, "valueTwo": value_two, "op": op}


def profile() -> dict[str, Any]:
    """The profile as data: allow by default, refuse what is listed above.

    Only the machine's native architecture is listed, so a 32-bit system call (which
    would dodge the per-argument rules through socketcall) kills the process.
    """
    rules = [_refuse(list(DENIED_SYSCALLS))]
    # glibc falls back to clone() when clone3 says it does not exist; clone3 passes its
    # flags in memory, where seccomp cannot look.
    rules.append(_refuse(["clone3"], ENOSYS))
    for flag in CLONE_NAMESPACE_FLAGS:
        rules.append(_refuse(["clone"], args=[_arg(0, flag, "SCMP_CMP_MASKED_EQ", flag)]))
    for family in range(SOCKET_FAMILY_MAX + 1):
        if family not in ALLOWED_SOCKET_FAMILIES:
            for call in ("socket", "socketpair"):
                rules.append(_refuse([call], args=[_arg(0, family, "SCMP_CMP_EQ")]))
    for call in ("socket", "socketpair"):
        rules.append(_refuse([call], args=[_arg(0, SOCKET_FAMILY_MAX, "SCMP_CMP_GT")]))
    for protocol in range(NETLINK_PROTOCOL_MAX + 1):
        if protocol not in ALLOWED_NETLINK_PROTOCOLS:
            netlink = [_arg(0, AF_NETLINK, "SCMP_CMP_EQ"), _arg(2, protocol, "SCMP_CMP_EQ")]
            rules.append(_refuse(["socket"], args=netlink))
    netlink_above = [
        _arg(0, AF_NETLINK, "SCMP_CMP_EQ"),
        _arg(2, NETLINK_PROTOCOL_MAX, "SCMP_CMP_GT"),
    ]
    rules.append(_refuse(["socket"], args=netlink_above))
    native = ARCHITECTURES.get(platform.machine())
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": [native] if native else [],
        "syscalls": rules,
    }


@functools.cache
def seccomp_profile() -> str:
    """The profile as the JSON text Docker takes in `--security-opt seccomp=`."""
    return json.dumps(profile(), separators=(",", ":"))
