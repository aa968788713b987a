"""Small stdlib-only Python programs run on the host with the host's Python (`python -I -c SCRIPT`).

Why Python on the host rather than shell: every GPU host that runs SGLang has a Python, while `ss`, `setsid`
or `pkill` flavours differ; and the checks (pid start time from /proc/<pid>/stat, command line, port holder
from /proc/net/tcp) must happen in one round trip, next to the process, without a race.

Files in the workdir: `logs/<svc>.log` (previous run kept as `.log.1`), `run/<svc>.json` (the pidfile:
pid, pgid, wrapper_pid, starttime, argv with secrets masked, argv_hash of the real argv, port, started_at),
`run/<svc>.exit` (written by the wrapper when the service exits: exit_code or signal), `run/<svc>.stopping`
(present while we are killing it), `run/<svc>.lock` (flock held by a launch from check to pidfile).

Trust (issue 20): the workdir and its run/ and logs/ folders must be directories owned by the login user and
writable by nobody else, every folder above them owned by root or that user and not writable by others
unless sticky (/var/tmp is fine); launch creates them 0700 and refuses anything else, with how to fix it.
A pidfile is believed only in such a workdir, and only for a process of our own uid whose command line is
the argv we would run for the spec (or the argv recorded by our own wrapper, which is still its parent).
Our Python runs isolated (`-I`, and the first sys.path entry dropped for older Pythons), the service gets
PYTHONSAFEPATH=1: the workdir (its cwd) is never on sys.path.
"""

from __future__ import annotations

from ddtree_tui import atomicio

# Who may write the workdir: shared with the doctor's probe (Python >= 3.6, stdlib only).
TRUST = (
    r"""
import os, stat
UID = os.getuid()

"""
    + r"""def user_name(uid):
    try:
        import pwd
        return '%s (uid %d)' % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return 'uid %d' % uid

def secure_dir(path, create):
    # None when `path` is a directory only we control (created 0700 when asked); else why not and the fix
    if not os.path.isabs(path):
        return ('workdir path %r is not absolute; set an absolute workdir in the host profile' % path)
    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as e:
            return 'cannot create %s: %s' % (path, e.strerror or e)
    elif not os.path.lexists(path):
        return None
    me = user_name(UID)
    try:
        lst = os.lstat(path)
    except OSError as e:
        return 'cannot inspect %s: %s' % (path, e.strerror or e)
    if stat.S_ISLNK(lst.st_mode) and lst.st_uid not in (0, UID):
        return ('%s is a symlink made by %s, not by you (%s): someone else decides where it points. '
                'Remove it, or set workdir to a directory of your own' % (path, user_name(lst.st_uid), me))
    real = os.path.realpath(path)
    cur = '/'
    for part in [p for p in real.split('/') if p][:-1]:
        cur = os.path.join(cur, part)
        try:
            st = os.stat(cur)
        except OSError as e:
            return 'cannot inspect %s: %s' % (cur, e.strerror or e)
        if st.st_uid not in (0, UID):
            return ('%s (above the workdir %s) belongs to %s: that user could swap the workdir. '
                    'Set workdir to a directory under one owned by you or root' % (cur, path, user_name(st.st_uid)))
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return ('%s (above the workdir %s) is writable by others without the sticky bit (mode %04o): '
                    'anyone could swap the workdir. Fix: chmod o-w,g-w %s, or choose another workdir'
                    % (cur, path, stat.S_IMODE(st.st_mode), cur))
    try:
        st = os.stat(real)
    except OSError as e:
        return 'cannot inspect %s: %s' % (real, e.strerror or e)
    if not stat.S_ISDIR(st.st_mode):
        return '%s is not a directory' % path
    if st.st_uid != UID:
        return ('workdir %s is owned by %s, not by you (%s): another user could plant code or a pidfile there. '
                'Nothing was started or signalled. Fix: if you do not know who made it, remove it (as root: '
                'rm -rf %s) and launch again (it is recreated with mode 0700), or set workdir to a directory '
                'of your own' % (path, user_name(st.st_uid), me, path))
    if st.st_mode & 0o022:
        return ('workdir %s is writable by group or others (mode %04o): another user could plant code or a '
                'pidfile there. Nothing was started or signalled. Fix: chmod 700 %s'
                % (path, stat.S_IMODE(st.st_mode), path))
    return None

"""
)

COMMON = (
    r"""from __future__ import annotations
import sys
if sys.path and sys.path[0] in ('', '.'):
    del sys.path[0]  # never import from the current directory (the workdir), whatever the Python version
import json, os, time, signal, socket, hashlib, stat
"""
    + atomicio.embedded_source()
    + TRUST
    + r"""
WRAPPER_MARK = 'ddtree-tui ' + 'service wrapper'  # the literal text appears only in the wrapper's source

def argv_hash(argv):
    return hashlib.sha256(json.dumps(list(argv)).encode()).hexdigest()[:16]

def proc_stat(pid):
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            data = f.read().decode('utf-8', 'replace')
    except (OSError, ValueError):
        return None
    rest = data[data.rfind(')') + 2:].split()
    return {'state': rest[0], 'ppid': int(rest[1]), 'pgrp': int(rest[2]), 'sid': int(rest[3]),
            'starttime': int(rest[19])}

def proc_uid(pid):
    try:
        return os.stat('/proc/%d' % pid).st_uid
    except OSError:
        return None

def proc_cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode('utf-8', 'replace') for a in raw.split(b'\0')[:-1]]

def check_workdir(cfg, create):
    dirs = [cfg['workdir'], os.path.dirname(cfg['pidfile'])]
    if cfg.get('log'):
        dirs.append(os.path.dirname(cfg['log']))
    for d in dirs:
        why = secure_dir(d, create)
        if why is not None:
            return why
    return None

def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def write_json(path, obj):
    write_file(path, json.dumps(obj), mode=0o600)

def rm(path):
    try:
        os.unlink(path)
    except OSError:
        pass

def is_our_wrapper(pid, rec):
    if not pid or pid != rec.get('wrapper_pid') or proc_uid(pid) != UID:
        return False
    st = proc_stat(pid)
    cmd = proc_cmdline(pid) or []
    return bool(st and st['state'] != 'Z' and st['sid'] == pid and cmd and WRAPPER_MARK in cmd[-1])

def identify(rec, accept):
    # 'ours' when the pid still runs an argv we accept for the spec, with our start time and our uid; else why not
    pid = int(rec.get('pid') or 0)
    st = proc_stat(pid) if pid > 0 else None
    if st is None or st['state'] == 'Z':
        return 'dead', None
    cmd = proc_cmdline(pid) or []
    if st['starttime'] != rec.get('starttime'):
        return 'pid-reused', ' '.join(cmd)[:200]
    if proc_uid(pid) != UID:
        return 'foreign', ' '.join(cmd)[:200]
    h = argv_hash(cmd)
    if h in accept:
        return 'ours', st
    if h == rec.get('argv_hash') and is_our_wrapper(st['ppid'], rec):
        return 'ours', st  # launched by our wrapper from an older spec: still ours
    return 'foreign', ' '.join(cmd)[:200]

def group_members(rec, exclude=(), grp=None):
    # live processes of the service's process group and session (the wrapper made both): our uid only.
    # A pgid is never handed out again while any process still uses it, so these are the service's own.
    # `grp` (from groups()) saves a scan of /proc when the caller already made one.
    pgid = int(rec.get('pgid') or 0)
    if pgid <= 1:
        return []
    out = []
    cands = grp.get(pgid, []) if grp is not None else [int(d) for d in os.listdir('/proc') if d.isdigit()]
    for pid in cands:
        if pid in exclude:
            continue
        st = proc_stat(pid)
        if st is not None and st['state'] != 'Z' and st['pgrp'] == pgid and st['sid'] == pgid and proc_uid(pid) == UID:
            out.append(pid)
    return sorted(out)

def groups():
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        st = proc_stat(int(d))
        if st is not None and st['state'] != 'Z':
            out.setdefault(st['pgrp'], []).append(int(d))
    return out

_GPU_CACHE = {'at': 0.0, 'data': {}}
def gpu_usage():
    # pid -> [[gpu index, MiB], ...] from nvidia-smi, at most every 10 s; {} without nvidia-smi
    if time.time() - _GPU_CACHE['at'] < 10:
        return _GPU_CACHE['data']
    data = {}
    try:
        import subprocess
        q = ['nvidia-smi', '--format=csv,noheader,nounits']
        gpus = subprocess.run(q + ['--query-gpu=index,pci.bus_id'], capture_output=True, text=True, timeout=5)
        apps = subprocess.run(q + ['--query-compute-apps=pid,used_memory,gpu_bus_id'], capture_output=True,
                              text=True, timeout=5)
        index = {}
        for line in gpus.stdout.splitlines():
            parts = [x.strip() for x in line.split(',')]
            if len(parts) >= 2 and parts[0].isdigit():
                index[parts[1].lower()] = int(parts[0])
        for line in apps.stdout.splitlines():
            parts = [x.strip() for x in line.split(',')]
            if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
                data.setdefault(int(parts[0]), []).append([index.get(parts[2].lower()), int(parts[1])])
    except Exception:
        data = {}
    _GPU_CACHE['at'], _GPU_CACHE['data'] = time.time(), data
    return data

def tail(path, n):
    window = max(16384, n * 512)
    try:
        with open(path, 'rb') as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - window))
            data = f.read().decode('utf-8', 'replace')
    except OSError:
        return []
    lines = [l.rstrip('\r') for l in data.split('\n')]
    if size > window:
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines.pop()
    return lines[-n:]

def free_mb(path):
    try:
        v = os.statvfs(path)
        return v.f_bavail * v.f_frsize // (1024 * 1024)
    except OSError:
        return None
"""
)

WRAPPER = (
    COMMON
    + r"""
# ddtree-tui service wrapper
# Session leader of the service's process group: starts the service, writes the pidfile, waits, records the
# exit status. Its configuration comes on stdin (never argv: `ps` would show the service's secrets).
# A TERM to the group ends the service; this wrapper only notes it and writes the exit file.
cfg = json.loads(sys.stdin.read())
def _note(signum, frame):
    pass
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, _note)
def word(a):
    plain = a and a.isprintable() and not any(c in a for c in ' \'"\\$`')
    return a if plain else json.dumps(a)  # a newline in an argument can never forge a log line
def say(msg):
    try:
        sys.stdout.write('[ddtree-tui] %s %s\n' % (time.strftime('%Y-%m-%d %H:%M:%S'), msg))
        sys.stdout.flush()
    except OSError:
        pass
say('launching %s: %s' % (cfg['name'], ' '.join(word(a) for a in cfg['display_argv'])))
def fail(code, why):
    try:
        write_json(cfg['exitfile'], {'exit_code': code, 'signal': None, 'error': why, 'ended_at': time.time()})
    except OSError:
        pass
    say('cannot start %s: %s' % (cfg['name'], why))
    sys.exit(code)
try:
    import subprocess
    p = subprocess.Popen(cfg['argv'], stdin=subprocess.DEVNULL)
except OSError as e:
    fail(127, str(e))
st = proc_stat(p.pid) or {}
rec = {'pid': p.pid, 'pgid': os.getpgid(0), 'wrapper_pid': os.getpid(), 'starttime': st.get('starttime'),
       'argv': cfg['display_argv'], 'argv_hash': argv_hash(cfg['argv']), 'port': cfg['port'], 'name': cfg['name'],
       'started_at': time.time(), 'log': cfg['log']}
try:
    write_json(cfg['pidfile'], rec)
except OSError as e:
    # an untracked service is worse than none: end it
    try:
        p.kill()
    except OSError:
        pass
    p.wait()
    fail(1, 'cannot write the pidfile %s: %s' % (cfg['pidfile'], e.strerror or e))
rc = p.wait()
info = {'pid': p.pid, 'exit_code': rc if rc >= 0 else None, 'signal': -rc if rc < 0 else None,
        'ended_at': time.time()}
try:
    write_json(cfg['exitfile'], info)
except OSError as e:
    say('cannot write the exit status %s: %s' % (cfg['exitfile'], e.strerror or e))
say('%s exited: %s' % (cfg['name'], ('status %d' % rc) if rc >= 0 else ('signal %d' % -rc)))
"""
)

LAUNCH = (
    COMMON
    + r"""
cfg = json.load(sys.stdin)
def out(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.stdout.flush()
    os._exit(0)

def port_free(bind, port):
    fam = socket.AF_INET6 if ':' in bind else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((bind, port))
        return True
    except OSError:
        return False
    finally:
        s.close()

def port_holder(port):
    inodes = set()
    for name in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if len(parts) > 9 and parts[3] == '0A' and int(parts[1].rsplit(':', 1)[1], 16) == port:
                        inodes.add('socket:[%s]' % parts[9])
        except OSError:
            pass
    if not inodes:
        return None
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            fds = os.listdir('/proc/%s/fd' % d)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink('/proc/%s/fd/%s' % (d, fd)) in inodes:
                    return {'pid': int(d), 'cmd': ' '.join(proc_cmdline(int(d)) or [])[:200]}
            except OSError:
                pass
    return {'pid': None, 'cmd': None}

why = check_workdir(cfg, create=True)
if why is not None:
    out({'ok': False, 'reason': 'workdir', 'why': why})
# one launch of a service at a time on this host: the check-then-spawn below runs under this lock, held
# until the pidfile is written (a second launch then finds the service running)
import fcntl
lock_fd = os.open(cfg['lockfile'], os.O_RDWR | os.O_CREAT | getattr(os, 'O_NOFOLLOW', 0), 0o600)
lock_deadline = time.time() + float(cfg.get('lock_timeout', 60))
while True:
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except BlockingIOError:
        if time.time() > lock_deadline:
            out({'ok': False, 'reason': 'busy'})
        time.sleep(0.05)
accept = set(cfg['accept'])
stale = None
rec = read_json(cfg['pidfile'])
if rec is not None:
    who, st = identify(rec, accept)
    if who == 'ours':
        out({'ok': False, 'reason': 'running', 'pid': rec.get('pid'), 'started_at': rec.get('started_at')})
    left = group_members(rec, exclude=(rec.get('pid'),)) if who in ('dead', 'pid-reused') else []
    if left:
        out({'ok': False, 'reason': 'degraded', 'pid': rec.get('pid'), 'pids': left})
    stale = {'pid': rec.get('pid'), 'why': who}
    rm(cfg['pidfile'])
bind = cfg['bind'] or '0.0.0.0'
if not port_free(bind, cfg['port']):
    nxt = None
    for p in range(cfg['port'] + 1, min(cfg['port'] + 500, 65536)):
        if p not in cfg['avoid_ports'] and port_free(bind, p):
            nxt = p
            break
    out({'ok': False, 'reason': 'port', 'port': cfg['port'], 'holder': port_holder(cfg['port']),
         'next_free': nxt})
space = free_mb(cfg['workdir'])
if space is not None and space < 1:
    out({'ok': False, 'reason': 'space', 'why': 'no space left on the device of %s (%d MiB free)' % (cfg['workdir'], space)})
if os.path.exists(cfg['log']):
    os.replace(cfg['log'], cfg['log'] + '.1')
rm(cfg['exitfile'])
rm(cfg['stopping'])
env = dict(os.environ)
env.update(cfg['env'])
env.setdefault('PYTHONSAFEPATH', '1')  # Python >= 3.11: the service's cwd (the workdir) is not on sys.path
import subprocess
logf = open(cfg['log'], 'ab')
os.chmod(cfg['log'], 0o600)
wcfg = {k: cfg[k] for k in ('argv', 'display_argv', 'pidfile', 'exitfile', 'port', 'name', 'log')}
w = subprocess.Popen([sys.executable, '-I', '-c', cfg['wrapper']], stdin=subprocess.PIPE,
                     stdout=logf, stderr=subprocess.STDOUT, cwd=cfg['cwd'], env=env, start_new_session=True,
                     close_fds=True)
try:
    w.stdin.write(json.dumps(wcfg).encode())
    w.stdin.close()
except OSError:
    pass
def space_note():
    mb = free_mb(cfg['workdir'])
    return (' (%d MiB free on the workdir\'s disk)' % mb) if mb is not None and mb < 64 else ''
deadline = time.time() + 15
while time.time() < deadline:
    rec = read_json(cfg['pidfile'])
    if rec is not None:
        out({'ok': True, 'record': rec, 'stale': stale})
    ex = read_json(cfg['exitfile'])
    if ex is not None:
        out({'ok': False, 'reason': 'exec', 'exit': ex, 'tail': tail(cfg['log'], 20)})
    if w.poll() is not None and read_json(cfg['pidfile']) is None:
        out({'ok': False, 'reason': 'exec', 'exit': {'exit_code': w.returncode,
             'error': 'the wrapper exited with status %d before writing its pidfile%s' % (w.returncode, space_note())},
             'tail': tail(cfg['log'], 20)})
    time.sleep(0.02)
out({'ok': False, 'reason': 'timeout', 'tail': tail(cfg['log'], 20)})
"""
)

KILL = (
    COMMON
    + r"""
cfg = json.load(sys.stdin)
def out(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.exit(0)
why = check_workdir(cfg, create=False)
if why is not None:
    out({'ok': False, 'result': 'untrusted', 'why': why})
rec = read_json(cfg['pidfile'])
if rec is None:
    out({'ok': True, 'result': 'not-running'})
accept = set(cfg.get('accept') or [])
who, info = identify(rec, accept)
pid = rec.get('pid')
wrapper = int(rec.get('wrapper_pid') or 0)

def end_pids(pids, timeout):
    # TERM each verified member, KILL what is left after the timeout; the pids that ended
    def live():
        return [p for p in pids if p in set(group_members(rec))]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except OSError:
            pass
    t0 = time.time()
    how = 'terminated'
    while live() and time.time() - t0 < timeout:
        time.sleep(0.05)
    if live():
        how = 'killed'
        for p in live():
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        t1 = time.time()
        while live() and time.time() - t1 < 10:
            time.sleep(0.05)
    return how, [p for p in pids if p not in live()], live()

if who != 'ours':
    left = group_members(rec, exclude=(pid, wrapper)) if who in ('dead', 'pid-reused') else []
    if left:
        # the main process is gone but its workers (the scheduler, the detokenizer: GPU memory) run on
        open(cfg['stopping'], 'a').close()
        t0 = time.time()
        how, ended, survivors = end_pids(left, cfg['timeout'])
        if not survivors:
            rm(cfg['pidfile'])
        rm(cfg['stopping'])
        out({'ok': not survivors, 'result': 'group-ended' if not survivors else 'survived', 'how': how,
             'pid': pid, 'ended': ended, 'survivors': survivors, 'exit': read_json(cfg['exitfile']),
             'waited': round(time.time() - t0, 3)})
    rm(cfg['pidfile'])
    rm(cfg['stopping'])
    if who == 'dead':
        out({'ok': True, 'result': 'stale', 'pid': pid, 'exit': read_json(cfg['exitfile'])})
    out({'ok': False, 'result': who, 'pid': pid, 'cmd': info})
open(cfg['stopping'], 'a').close()
pgid = rec.get('pgid')
group = info['pgrp'] == pgid and pgid not in (None, 0, 1)
before = group_members(rec, exclude=(pid, wrapper)) if group else []
def send(sig):
    try:
        if group:
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
def alive():
    if group:
        return bool(group_members(rec))
    w, _ = identify(rec, accept)
    return w == 'ours'
t0 = time.time()
send(signal.SIGTERM)
result = 'terminated'
while alive():
    if time.time() - t0 > cfg['timeout']:
        send(signal.SIGKILL)
        result = 'killed'
        t1 = time.time()
        while alive() and time.time() - t1 < 10:
            time.sleep(0.05)
        break
    time.sleep(0.05)
gone = not alive()
if gone:
    rm(cfg['pidfile'])
rm(cfg['stopping'])
out({'ok': gone, 'result': result if gone else 'survived', 'pid': pid, 'ended': before,
     'waited': round(time.time() - t0, 3)})
"""
)

WATCH = (
    COMMON
    + r"""
# One JSON line per interval with every service's process state; ends when stdout closes (EPIPE).
interval = float(sys.argv[1])
services = json.loads(sys.argv[2])
once = len(sys.argv) > 3 and sys.argv[3] == 'once'
def one(svc, grp):
    why = check_workdir(svc, create=False)
    if why is not None:
        return {'present': False, 'untrusted': why}
    rec = read_json(svc['pidfile'])
    if rec is None:
        return {'present': False}
    who, st = identify(rec, set(svc.get('accept') or []))
    r = {'present': True, 'pid': rec.get('pid'), 'pgid': rec.get('pgid'), 'started_at': rec.get('started_at'),
         'argv_hash': rec.get('argv_hash'), 'port': rec.get('port')}
    if who == 'ours':
        r['alive'] = True
        r['pids'] = sorted(set(grp.get(rec.get('pgid'), []) + [rec.get('pid')])) if st['pgrp'] == rec.get('pgid') else [rec.get('pid')]
        r['last'] = tail(svc['log'], 1)
    else:
        r['alive'] = False
        r['why'] = who
        r['other_cmd'] = st if who != 'dead' else None
        r['stopping'] = os.path.exists(svc['stopping'])
        r['exit'] = read_json(svc['exitfile'])
        wpid = int(rec.get('wrapper_pid') or 0)
        t_end = time.time() + 1.0
        # the service just died and its wrapper is writing the exit status: give it a moment
        while r['exit'] is None and wpid > 0 and time.time() < t_end:
            wst = proc_stat(wpid)
            if wst is None or wst['state'] == 'Z':
                break
            time.sleep(0.02)
            r['exit'] = read_json(svc['exitfile'])
        r['tail'] = tail(svc['log'], 20)
        if who in ('dead', 'pid-reused'):
            left = group_members(rec, exclude=(rec.get('pid'), wpid), grp=grp)
            if left:
                use = gpu_usage()
                r['orphans'] = left
                r['orphan_gpu'] = [g for p in left for g in use.get(p, [])]
    return r
while True:
    grp = groups()
    res = {}
    for svc in services:
        try:
            res[svc['name']] = one(svc, grp)
        except Exception as e:
            res[svc['name']] = {'present': False, 'error': repr(e)}
    try:
        sys.stdout.write(json.dumps({'ts': time.time(), 'services': res}) + '\n')
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        sys.exit(0)
    if once:
        break
    time.sleep(interval)
"""
)

READ_LOG = (
    COMMON
    + r"""
sys.stdout.write(json.dumps(tail(sys.argv[1], int(sys.argv[2]))) + '\n')
"""
)
