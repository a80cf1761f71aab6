"""Remove a directory tree a hostile program left behind (standalone: no ttlab imports).

Only used when the private mount namespace is unavailable (with it, the work dir lives on a tmpfs that
the kernel frees with the namespace). Called by the runner AFTER every process of the run is dead, so
the tree is static. It must survive any shape the program could build:

- depth: iterative and flattening (each nested directory is renamed up into the top directory, so the
  walk never recurses and holds two directory descriptors at a time); 100k levels cost 100k renames;
- symlinks: never followed (entries are inspected with lstat through the directory fd; a symlink or
  any non-directory is unlinked, never opened);
- permissions: a directory the owner made unreadable (mode 000) is chmod-ed back before it is opened.

Returns the number of entries removed; raises OSError only when the top directory itself cannot be
opened or emptied (the runner reports that as a cleanup failure, never the parent).
"""

import os
import stat


def _open_dir(name, dir_fd):
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=dir_fd)  # a real directory (lstat said so): fchmodat follows nothing here
        return os.open(name, flags, dir_fd=dir_fd)


def _free_name(dir_fd, counter):
    while True:
        counter += 1
        try:
            os.stat(f".rm{counter}", dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return counter


def remove_tree(path):
    """Delete `path` (a directory) and everything under it without following links or recursing."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return 1
    parent_fd = os.open(os.path.dirname(os.path.abspath(path)) or "/", os.O_RDONLY | os.O_DIRECTORY)
    base = os.path.basename(os.path.abspath(path))
    removed = 0
    try:
        top = _open_dir(base, parent_fd)
        try:
            counter = 0
            while True:
                names = os.listdir(top)
                if not names:
                    break
                for name in names:
                    st = os.stat(name, dir_fd=top, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        os.unlink(name, dir_fd=top)
                        removed += 1
                        continue
                    sub = _open_dir(name, top)
                    try:
                        for inner in os.listdir(sub):
                            ist = os.stat(inner, dir_fd=sub, follow_symlinks=False)
                            if stat.S_ISDIR(ist.st_mode):
                                counter = _free_name(top, counter)
                                os.rename(inner, f".rm{counter}", src_dir_fd=sub, dst_dir_fd=top)  # flatten
                            else:
                                os.unlink(inner, dir_fd=sub)
                                removed += 1
                    finally:
                        os.close(sub)
                    os.rmdir(name, dir_fd=top)
                    removed += 1
        finally:
            os.close(top)
        os.rmdir(base, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)
    return removed + 1
