"""Kernel confinement layers for one sandboxed program (standalone: no ttlab imports, used by the runner).

Once per runner (`build_view`, the "fsview" layer): the runner moves into its own mount namespace and
pivots into a minimal root it builds on a tmpfs: read-only bind mounts of the interpreter's library
directory (standard library, lib-dynload, libpython), the installed packages (the venv's site-packages),
the system library directories the interpreter has mapped, the harmless devices (null, zero, full,
random, urandom), any paths the caller exposes on purpose, and a proc of the runner's own. Nothing else
of the host exists in it: not the project checkout, not home directories, not /etc, not /usr/bin.

Per program, in the forked child, in this order, before the program's code runs:

1. `private_mounts`: private mount, IPC and UTS namespaces (SysV shared memory, semaphores, message queues
   and POSIX mqueues are the run's own and are destroyed with it); fresh size-capped tmpfs on /tmp and
   /dev/shm (gone when the last process of the run exits; /var/tmp is a link to /tmp) and a new /proc
   instance with `hidepid=invisible` (other users' processes are not listed). Without the minimal root
   (fsview missing) it falls back to the host's tree: / remounted read-only (`readonly_root`), tmpfs on
   /tmp, /var/tmp, /dev/shm, empty read-only tmpfs over /run, /home and /root.
2. `no_new_privs`: PR_SET_NO_NEW_PRIVS (no setuid/file-capability gain).
3. `install_seccomp`: a hand-written classic-BPF filter (x86_64 only): socket() of any family but AF_INET
   and AF_INET6 -> EACCES (no Unix, netlink, packet or vsock socket: no host socket whatever its path or
   address), socketpair -> EACCES; execve and execveat -> EPERM (the program runs in the forked
   interpreter and nothing else ever starts); clone with any CLONE_NEW* flag and unshare/setns -> EPERM,
   clone3 -> ENOSYS (libc falls back to clone, whose flags we can read); every SysV IPC call (shm*, sem*,
   msg*) -> EPERM (memory outside RLIMIT_AS and the watchdog); EPERM for mount/umount/pivot_root/chroot,
   ptrace/process_vm_*/pidfd_getfd, keyctl & co, bpf, perf_event_open, userfaultfd, io_uring (its SOCKET
   op would bypass the socket rule), memfd_create/memfd_secret (RAM outside RLIMIT_AS), module/kexec/
   reboot/swap/acct/syslog, the new mount API and open_by_handle_at. Foreign-architecture and x32 system
   calls -> EPERM.

`SAFE_ENV` is the whole environment of a runner and of a program (plus HOME/TMPDIR = the work dir).

Every function raises OSError with the failing step on error; the runner probes each layer once at start
(`probe`, `build_view`) and reports which are available, so a missing layer is named in a warning, never
silent.
"""

import ast
import ctypes
import errno
import os
import platform
import stat
import struct
import sys

SAFE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
"""The whole environment of a runner and of every program it runs (the program also gets HOME and TMPDIR =
its work dir). One copy: `sandbox.py` starts runners with it, the runner resets each child to it."""

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
MNT_DETACH = 2

PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_SET_SECCOMP = 38, 39, 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

# x86_64 system call numbers
NR_SOCKET, NR_SOCKETPAIR, NR_CLONE, NR_CLONE3, NR_PIVOT_ROOT = 41, 53, 56, 435, 155
SOCKET_FAMILIES = (2, 10)
"""AF_INET, AF_INET6: the only sockets a program may create (they reach nothing in the empty network
namespace); every other family, AF_UNIX, AF_NETLINK, AF_PACKET and AF_VSOCK included, gets EACCES."""
DENY_EPERM = {
    "shmget": 29, "shmat": 30, "shmctl": 31, "execve": 59, "semget": 64, "semop": 65, "semctl": 66,
    "shmdt": 67, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "semtimedop": 220, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "finit_module": 313, "memfd_create": 319, "kexec_file_load": 320, "bpf": 321, "execveat": 322,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_getfd": 438, "mount_setattr": 442, "memfd_secret": 447,
}
"""Denied with EPERM (the program gets an ordinary PermissionError)."""

HIDDEN_DIRS = ("/run", "/home", "/root")
"""Without the minimal root: covered by an empty read-only tmpfs (host sockets, pid files, homes)."""
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
"""Without the minimal root: fresh writable tmpfs per run, size-capped."""
VIEW_TMP = ("/tmp", "/dev/shm")
"""In the minimal root: fresh writable tmpfs per run, size-capped (/var/tmp links to /tmp)."""
VIEW_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""Device nodes bound into the minimal root (no tty, no disk, no /dev/shm of the host)."""
VIEW_LINKS = {"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0", "/dev/stdout": "/proc/self/fd/1",
              "/dev/stderr": "/proc/self/fd/2", "/var/tmp": "/tmp"}
VIEW_STAGE = "/tmp"
"""Where the runner assembles the minimal root (a tmpfs over it in the runner's own mount namespace)."""

_libc = None
_in_private_ns = False


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _libc.unshare.argtypes = [ctypes.c_int]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(source, target, fstype, flags, data=""):
    _check(libc().mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                        flags, data.encode() if data else None), f"mount {fstype or source or ''} on {target}")


def unshare(flags):
    _check(libc().unshare(flags), f"unshare({flags:#x})")


# ---- the minimal root, built once per runner ----------------------------------------------------------
def _mapped_dirs():
    """Directories of the files this process has mapped (shared libraries, locale data), resolved, without
    the interpreter's own executable: what the loader may need again for a lazily imported module."""
    exe = os.path.realpath(sys.executable)
    out = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            path = parts[5].strip() if len(parts) == 6 else ""
            if not path.startswith("/") or path.endswith("(deleted)") or path.startswith(("/dev/", "/proc/", "/memfd:")):
                continue
            real = os.path.realpath(path)
            if real != exe and os.path.isfile(real):
                out.add(os.path.dirname(real))
    return out


def _python_dirs():
    """The sys.path entries that belong to the installation: the standard library (with lib-dynload) and the
    site directories (site-packages / dist-packages). Not the runner's own directory, not the current
    directory, not a path an editable install or a .pth file added (e.g. a project checkout)."""
    stdlib = os.path.dirname(os.__file__)
    out = {stdlib}
    for p in sys.path:
        if p and os.path.isdir(p) and (p == stdlib or p.startswith(stdlib + os.sep)
                                       or os.path.basename(p) in ("site-packages", "dist-packages")):
            out.add(os.path.abspath(p))
    return out


def _outermost(paths):
    """Drop every path that lies inside another one of the set."""
    out = []
    for p in sorted(set(paths)):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


SHADOWED = ("/tmp", "/var/tmp", "/dev", "/proc")
"""Directories the view or each run replaces with its own: nothing under them can be put in the view."""


def _shadow_of(path):
    return next((d for d in SHADOWED if path == d or path.startswith(d + "/")), None)


def check_exposable(path):
    """An absolute path a caller may expose, or ValueError saying why not (it does not exist, or it lies under
    a directory every run replaces: /tmp, /var/tmp, /dev, /proc)."""
    p = os.path.abspath(path)
    if not os.path.exists(p):
        raise ValueError(f"expose: {p} does not exist")
    if _shadow_of(p):
        raise ValueError(f"expose: {p} lies under {_shadow_of(p)}, which every run replaces with its own")
    return p


def view_paths(expose=()):
    """Host paths a program sees, each read-only at the same path: the installation's Python directories,
    the directories of the shared libraries the interpreter has mapped, and `expose` (paths a caller puts
    in the view on purpose, e.g. a library of building blocks)."""
    try:
        extra = [check_exposable(p) for p in expose]
    except ValueError as e:
        raise OSError(errno.EINVAL, str(e)) from e
    paths = _outermost(_python_dirs() | _mapped_dirs() | set(extra))
    if "/" in paths:
        raise OSError(errno.EINVAL, "the view would contain the whole host root")
    for p in paths:
        if _shadow_of(p):  # e.g. a venv in /tmp: each run's own /tmp would hide it
            raise OSError(errno.EINVAL, f"{p} is needed in the view but lies under {_shadow_of(p)}, which every run replaces")
    return paths


def _makedirs(path):
    """mkdir -p inside the stage (every component a real directory, 0755)."""
    cur = ""
    for part in path.strip("/").split("/"):
        cur += "/" + part
        try:
            os.mkdir(cur, 0o755)
        except FileExistsError:
            pass


def _bind_readonly(fd, target, device=False):
    """Bind the file or directory held by the O_PATH `fd` on `target`, read-only, nosuid (and nodev unless it
    is one of the view's device nodes)."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        _makedirs(target)
    else:
        _makedirs(os.path.dirname(target))
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND)
    mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (0 if device else MS_NODEV))


def build_view(paths):
    """Move the calling process (the runner) into its own mount namespace and pivot it into a new root that
    holds only `paths` (read-only), the view's devices, a runner-wide /proc and empty /tmp, /dev/shm.

    Raises OSError before the pivot (the process keeps the host's tree, in its own namespace: fall back);
    after the pivot a failure raises RuntimeError (the process is in a half-built root and must exit)."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates to the host
    fds = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC), False) for p in paths]  # opened before the stage covers /tmp
    fds += [(d, os.open(d, os.O_PATH | os.O_CLOEXEC), True) for d in VIEW_DEVICES if os.path.exists(d)]
    stage = VIEW_STAGE
    try:
        mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
        for p, fd, device in fds:
            _bind_readonly(fd, stage + p, device)
    finally:
        for _, fd, _ in fds:
            os.close(fd)
    for d in ("/tmp", "/dev/shm", "/proc", "/.old"):
        _makedirs(stage + d)
    os.chmod(stage + "/tmp", 0o1777)
    for link, target in VIEW_LINKS.items():
        _makedirs(os.path.dirname(stage + link))
        if not os.path.lexists(stage + link):
            os.symlink(target, stage + link)
    for top in ("/lib", "/lib32", "/lib64", "/libx32"):  # merged-/usr links the loader's default paths go through
        if os.path.islink(top) and not os.path.lexists(stage + top):
            os.symlink(os.readlink(top), stage + top)
    mount("proc", stage + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(stage)
    if libc().syscall(NR_PIVOT_ROOT, b".", b".old") != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"pivot_root: {os.strerror(e)}")
    try:
        os.chdir("/")
        _check(libc().umount2(b"/.old", MNT_DETACH), "umount2 /.old")
        os.rmdir("/.old")
        mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    except OSError as e:
        raise RuntimeError(f"minimal root half built: {e}") from e


# ---- per run ------------------------------------------------------------------------------------------
def private_mounts(tmp_mb, uid=None, in_view=False, expose=()):
    """New mount, IPC and UTS namespaces with private tmpfs dirs and a hidepid /proc; returns the program's
    work dir (inside /tmp). `in_view`: the caller is in the minimal root (`build_view`), whose mounts are
    already private and read-only; else the host's tree is used (hidden dirs covered, see module docstring),
    with the installation's Python directories and the `expose`d paths under a covered dir bound back read-only."""
    global _in_private_ns
    unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)  # IPC: SysV shm/sem/msg and mqueues die with the run
    size = f"size={int(tmp_mb)}m,nr_inodes=16384"
    if in_view:
        _in_private_ns = True
        for d in VIEW_TMP:
            mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, size + ",mode=1777")
    else:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        _in_private_ns = True
        covered = [d for d in PRIVATE_TMP + HIDDEN_DIRS if os.path.isdir(d) and not os.path.islink(d)]
        # the installation's Python directories under a covered one (a venv in /tmp, pyenv or conda in a home)
        # are bound back read-only, or the program could not import what the runner has not imported already
        keep = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in _outermost(_python_dirs() | set(expose))
                if os.path.exists(p) and any(p.startswith(d + "/") for d in covered)]
        try:
            for d in covered:
                hidden = d in HIDDEN_DIRS
                opts = "size=64k,nr_inodes=256,mode=755" if hidden else size + ",mode=1777"
                mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV | (MS_NOEXEC if hidden else 0), opts)
            for p, fd in keep:
                _bind_readonly(fd, p)
            for d in covered:
                if d in HIDDEN_DIRS:  # empty but for the bound-back paths, and read-only
                    mount(None, d, None, MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
        finally:
            for _, fd in keep:
                os.close(fd)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
    wd = "/tmp/work"
    os.mkdir(wd, 0o700)
    if uid is not None:
        os.chown(wd, uid, uid)
    return wd


def readonly_root():
    """Remount / read-only in the run's mount namespace (the private tmpfs mounts on top stay writable); only
    needed without the minimal root, whose / is read-only already.

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
        (_JEQ, NR_SOCKETPAIR, "eacces", None),  # only AF_UNIX pairs exist: a datagram one reaches any visible socket path
        (_JEQ, NR_CLONE, "clone", None),
        (_JEQ, NR_CLONE3, "enosys", None),
    ]
    for nr in sorted(DENY_EPERM.values()):
        p.append((_JEQ, nr, "eperm", None))
    p += [
        (_RET, RET_ALLOW, None, None),
        ("label", "socket"),
        (_LD_ABS, 16, None, None),  # args[0] low word: the address family
    ]
    for fam in SOCKET_FAMILIES:
        p.append((_JEQ, fam, "allow", None))
    p += [
        (_RET, RET_ERRNO | errno.EACCES, None, None),
        ("label", "clone"),
        (_LD_ABS, 16, None, None),  # args[0] low word: the clone flags
        (_JSET, CLONE_NEW_ANY, "eperm", None),
        ("label", "allow"), (_RET, RET_ALLOW, None, None),
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
            elif libc().execve(b"/nonexistent", None, None) == 0 or ctypes.get_errno() != errno.EPERM:
                out["seccomp"] = "filter installed but execve still allowed"
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
