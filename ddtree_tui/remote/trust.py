"""Who may write the workdir (issue 20): shared by the service programs and the doctor's probe.

Runs on the host with Python >= 3.6 and the standard library only (no `from __future__ import annotations`).
"""

import os
import stat
from typing import Optional

UID = os.getuid()


def user_name(uid: int) -> str:
    try:
        import pwd

        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %d" % uid


def secure_dir(path: str, create: bool) -> Optional[str]:
    # None when `path` is a directory only we control (created 0700 when asked); else why not and the fix
    if not os.path.isabs(path):
        return "workdir path %r is not absolute; set an absolute workdir in the host profile" % path
    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as e:
            return "cannot create %s: %s" % (path, e.strerror or e)
    elif not os.path.lexists(path):
        return None
    me = user_name(UID)
    try:
        lst = os.lstat(path)
    except OSError as e:
        return "cannot inspect %s: %s" % (path, e.strerror or e)
    if stat.S_ISLNK(lst.st_mode) and lst.st_uid not in (0, UID):
        return (
            "%s is a symlink made by %s, not by you (%s): someone else decides where it points. "
            "Remove it, or set workdir to a directory of your own" % (path, user_name(lst.st_uid), me)
        )
    real = os.path.realpath(path)
    cur = "/"
    for part in [p for p in real.split("/") if p][:-1]:
        cur = os.path.join(cur, part)
        try:
            st = os.stat(cur)
        except OSError as e:
            return "cannot inspect %s: %s" % (cur, e.strerror or e)
        if st.st_uid not in (0, UID):
            return (
                "%s (above the workdir %s) belongs to %s: that user could swap the workdir. "
                "Set workdir to a directory under one owned by you or root"
                % (cur, path, user_name(st.st_uid))
            )
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return (
                "%s (above the workdir %s) is writable by others without the sticky bit (mode %04o): "
                "anyone could swap the workdir. Fix: chmod o-w,g-w %s, or choose another workdir"
                % (cur, path, stat.S_IMODE(st.st_mode), cur)
            )
    try:
        st = os.stat(real)
    except OSError as e:
        return "cannot inspect %s: %s" % (real, e.strerror or e)
    if not stat.S_ISDIR(st.st_mode):
        return "%s is not a directory" % path
    if st.st_uid != UID:
        return (
            "workdir %s is owned by %s, not by you (%s): another user could plant code or a pidfile there. "
            "Nothing was started or signalled. Fix: if you do not know who made it, remove it (as root: "
            "rm -rf %s) and launch again (it is recreated with mode 0700), or set workdir to a directory "
            "of your own" % (path, user_name(st.st_uid), me, path)
        )
    if st.st_mode & 0o022:
        return (
            "workdir %s is writable by group or others (mode %04o): another user could plant code or a "
            "pidfile there. Nothing was started or signalled. Fix: chmod 700 %s"
            % (path, stat.S_IMODE(st.st_mode), path)
        )
    return None
