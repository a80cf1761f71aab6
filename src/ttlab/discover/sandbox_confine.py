"""Kernel confinement layers for one sandboxed program (standalone: no ttlab imports, used by the runner).

Applied in the forked child, in this order, before the program's code runs:

1. `private_mounts`: a private mount namespace (unshare CLONE_NEWNS, then / made rprivate so nothing
   propagates back) and private IPC and UTS namespaces (SysV shared memory, semaphores, message queues
   and POSIX mqueues are the run's own and are destroyed with it) with fresh size-capped tmpfs on /tmp, /var/tmp and /dev/shm (gone when the last
   process of the run exits), empty read-only tmpfs over /run (and so /var/run: host Unix sockets, pid
   files), /home and /root, and a new /proc instance with `hidepid=invisible` (other users' processes,
   their command lines included, are not listed). `readonly_root` then remounts / read-only in that
   namespace (as a docker read-only root: nothing on the host file system is writable to the program).
2. `no_new_privs`: PR_SET_NO_NEW_PRIVS (no setuid/file-capability gain across exec).
3. `install_seccomp`: a hand-written classic-BPF filter (x86_64 only): socket(AF_UNIX) -> EACCES (no
   filesystem or abstract Unix socket anywhere), clone with any CLONE_NEW* flag and unshare/setns ->
   EPERM (no user or other namespaces), clone3 -> ENOSYS (libc falls back to clone, whose flags we can
   read), and EPERM for mount/umount/pivot_root/chroot, ptrace/process_vm_*, keyctl & co, bpf,
   perf_event_open, userfaultfd, io_uring (its SOCKET op would bypass the socket rule), memfd_create
   (RAM outside RLIMIT_AS), module/kexec/reboot/swap/acct/syslog, the new mount API and
   open_by_handle_at. Foreign-architecture and x32 system calls -> EPERM.

Every function raises OSError with the failing step on error; the runner probes each layer once at start
(`probe`) and reports which are available, so a missing layer is named in a warning, never silent.
"""

import ast
import ctypes
import errno
import os
import platform
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEW_ANY = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 0x4000, 1 << 18

PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_SET_SECCOMP = 38, 39, 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

# x86_64 system call numbers
NR_SOCKET, NR_CLONE, NR_CLONE3 = 41, 56, 435
DENY_EPERM = {
    "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "finit_module": 313, "memfd_create": 319, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}
"""Denied with EPERM (the program gets an ordinary PermissionError)."""

HIDDEN_DIRS = ("/run", "/home", "/root")
"""Covered by an empty read-only tmpfs (host sockets, pid files, home directories); /var/run -> /run."""
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
"""Fresh writable tmpfs per run, size-capped."""

_libc = None
_in_private_ns = False


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.unshare.argtypes = [ctypes.c_int]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _libc


def _check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(source, target, fstype, flags, data=""):
    _check(libc().mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                        flags, data.encode() if data else None), f"mount {fstype or ''} on {target}")


def unshare(flags):
    _check(libc().unshare(flags), f"unshare({flags:#x})")


def private_mounts(tmp_mb, uid=None):
    """New mount namespace with private tmpfs dirs; returns the program's work dir (inside /tmp)."""
    global _in_private_ns
    unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)  # IPC: SysV shm/sem/msg and mqueues die with the run
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    _in_private_ns = True
    size = f"size={int(tmp_mb)}m,nr_inodes=16384"
    for d in PRIVATE_TMP:
        if os.path.isdir(d) and not os.path.islink(d):
            mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, size + ",mode=1777")
    for d in HIDDEN_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,nr_inodes=8,mode=755")
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
    wd = "/tmp/work"
    os.mkdir(wd, 0o700)
    if uid is not None:
        os.chown(wd, uid, uid)
    return wd


def readonly_root():
    """Remount / read-only in the run's mount namespace (the private tmpfs mounts on top stay writable).

    Refuses unless `private_mounts` succeeded in this process: in the host's namespace it would make the
    host's root read-only."""
    if not _in_private_ns:
        raise OSError(errno.EPERM, "readonly_root: not inside a private mount namespace")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def no_new_privs():
    _check(libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


# ---- seccomp: a tiny classic-BPF assembler ---------------------------------------------------------
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06


def _offset(labels, lbl, i):
    """Jump distance from instruction i to a label (classic BPF jumps forward only, < 256)."""
    if lbl is None:
        return 0
    d = labels[lbl] - i - 1
    if not 0 <= d < 256:
        raise ValueError(f"bpf jump to {lbl} out of range")
    return d


def _assemble(prog):
    """prog: list of (op, k, jt_label, jf_label) or ("label", name). Returns packed sock_filter bytes."""
    labels, ins = {}, []
    for item in prog:
        if item[0] == "label":
            labels[item[1]] = len(ins)
        else:
            ins.append(item)
    out = b""
    for i, (op, k, jt, jf) in enumerate(ins):
        out += struct.pack("HBBI", op, _offset(labels, jt, i), _offset(labels, jf, i), k & 0xFFFFFFFF)
    return out, len(ins)


def seccomp_program():
    """The filter as packed sock_filter instructions (see the module docstring)."""
    p = [
        (_LD_ABS, 4, None, None),  # seccomp_data.arch
        (_JEQ, AUDIT_ARCH_X86_64, None, "eperm"),
        (_LD_ABS, 0, None, None),  # seccomp_data.nr
        (_JGE, X32_SYSCALL_BIT, "eperm", None),
        (_JEQ, NR_SOCKET, "socket", None),
        (_JEQ, NR_CLONE, "clone", None),
        (_JEQ, NR_CLONE3, "enosys", None),
    ]
    for nr in sorted(DENY_EPERM.values()):
        p.append((_JEQ, nr, "eperm", None))
    p += [
        (_RET, RET_ALLOW, None, None),
        ("label", "socket"),
        (_LD_ABS, 16, None, None),  # args[0] low word: the address family
        (_JEQ, 1, "eacces", None),  # AF_UNIX
        (_RET, RET_ALLOW, None, None),
        ("label", "clone"),
        (_LD_ABS, 16, None, None),  # args[0] low word: the clone flags
        (_JSET, CLONE_NEW_ANY, "eperm", None),
        (_RET, RET_ALLOW, None, None),
        ("label", "eperm"), (_RET, RET_ERRNO | errno.EPERM, None, None),
        ("label", "eacces"), (_RET, RET_ERRNO | errno.EACCES, None, None),
        ("label", "enosys"), (_RET, RET_ERRNO | errno.ENOSYS, None, None),
    ]
    return _assemble(p)


def seccomp_supported():
    return platform.machine() == "x86_64"


def install_seccomp():
    """Install the filter on the calling thread (inherited by every descendant, cannot be removed)."""
    if not seccomp_supported():
        raise OSError(errno.ENOSYS, f"seccomp filter written for x86_64 only (this is {platform.machine()})")
    code, n = seccomp_program()
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(n, ctypes.addressof(buf))
    _check(libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "prctl(PR_SET_SECCOMP)")


def probe(tmp_mb=16):
    """Try every layer in a throwaway child; {layer: "" if available else the reason}."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = {}
        for name, fn in (("mountns", lambda: private_mounts(tmp_mb)), ("readonly_root", readonly_root),
                         ("no_new_privs", no_new_privs), ("seccomp", install_seccomp)):
            try:
                fn()
                out[name] = ""
            except (OSError, ValueError, AttributeError) as e:
                out[name] = str(e) or type(e).__name__
        if not out["seccomp"]:
            fd = libc().socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM
            if fd >= 0 or ctypes.get_errno() != errno.EACCES:
                out["seccomp"] = "filter installed but socket(AF_UNIX) still allowed"
        os.write(w, repr(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    try:
        got = ast.literal_eval(data.decode())
    except (ValueError, SyntaxError):
        got = {}
    return {k: got.get(k, "probe child failed") for k in ("mountns", "readonly_root", "no_new_privs", "seccomp")}
