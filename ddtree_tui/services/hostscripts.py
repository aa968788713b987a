"""Small stdlib-only Python programs run on the host with the host's Python (`python -c SCRIPT`).

Why Python on the host rather than shell: every GPU host that runs SGLang has a Python, while `ss`, `setsid`
or `pkill` flavours differ; and the checks (pid start time from /proc/<pid>/stat, command line, port holder
from /proc/net/tcp) must happen in one round trip, next to the process, without a race.

Files in the workdir: `logs/<svc>.log` (previous run kept as `.log.1`), `run/<svc>.json` (the pidfile:
pid, pgid, starttime, argv, argv_hash, port, started_at), `run/<svc>.exit` (written by the wrapper when the
service exits: exit_code or signal), `run/<svc>.stopping` (present while we are killing it).
"""

from __future__ import annotations

COMMON = r"""
import json, os, sys, time, signal, socket, hashlib

def argv_hash(argv):
    return hashlib.sha256(json.dumps(list(argv)).encode()).hexdigest()[:16]

def proc_stat(pid):
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            data = f.read().decode('utf-8', 'replace')
    except (OSError, ValueError):
        return None
    rest = data[data.rfind(')') + 2:].split()
    return {'state': rest[0], 'pgrp': int(rest[2]), 'starttime': int(rest[19])}

def proc_cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode('utf-8', 'replace') for a in raw.split(b'\0')[:-1]]

def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def write_json(path, obj):
    tmp = '%s.tmp%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)

def rm(path):
    try:
        os.unlink(path)
    except OSError:
        pass

def identify(rec):
    # 'ours' when the pid still runs our argv with our start time; else why not
    pid = int(rec.get('pid') or 0)
    st = proc_stat(pid) if pid > 0 else None
    if st is None or st['state'] == 'Z':
        return 'dead', None
    cmd = proc_cmdline(pid) or []
    if st['starttime'] != rec.get('starttime'):
        return 'pid-reused', ' '.join(cmd)[:200]
    if argv_hash(cmd) != rec.get('argv_hash'):
        return 'foreign', ' '.join(cmd)[:200]
    return 'ours', st

def groups():
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        st = proc_stat(int(d))
        if st is not None and st['state'] != 'Z':
            out.setdefault(st['pgrp'], []).append(int(d))
    return out

def group_alive(pgid):
    for d in os.listdir('/proc'):
        if d.isdigit():
            st = proc_stat(int(d))
            if st is not None and st['pgrp'] == pgid and st['state'] != 'Z':
                return True
    return False

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
"""

WRAPPER = (
    COMMON
    + r"""
# Session leader of the service's process group: starts the service, writes the pidfile, waits, records the
# exit status. A TERM to the group ends the service; this wrapper only notes it and writes the exit file.
cfg = json.loads(sys.argv[1])
def _note(signum, frame):
    pass
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, _note)
def say(msg):
    sys.stdout.write('[ddtree-tui] %s %s\n' % (time.strftime('%Y-%m-%d %H:%M:%S'), msg))
    sys.stdout.flush()
say('launching %s: %s' % (cfg['name'], ' '.join(cfg['argv'])))
try:
    import subprocess
    p = subprocess.Popen(cfg['argv'], stdin=subprocess.DEVNULL)
except OSError as e:
    write_json(cfg['exitfile'], {'exit_code': 127, 'signal': None, 'error': str(e), 'ended_at': time.time()})
    say('cannot start %s: %s' % (cfg['argv'][0], e))
    sys.exit(127)
st = proc_stat(p.pid) or {}
rec = {'pid': p.pid, 'pgid': os.getpgid(0), 'wrapper_pid': os.getpid(), 'starttime': st.get('starttime'),
       'argv': cfg['argv'], 'argv_hash': argv_hash(cfg['argv']), 'port': cfg['port'], 'name': cfg['name'],
       'started_at': time.time(), 'log': cfg['log']}
write_json(cfg['pidfile'], rec)
rc = p.wait()
info = {'pid': p.pid, 'exit_code': rc if rc >= 0 else None, 'signal': -rc if rc < 0 else None,
        'ended_at': time.time()}
write_json(cfg['exitfile'], info)
say('%s exited: %s' % (cfg['name'], ('status %d' % rc) if rc >= 0 else ('signal %d' % -rc)))
"""
)

LAUNCH = (
    COMMON
    + r"""
cfg = json.load(sys.stdin)
def out(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.exit(0)

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

for p in (cfg['log'], cfg['pidfile']):
    os.makedirs(os.path.dirname(p), exist_ok=True)
os.makedirs(cfg['cwd'], exist_ok=True)
stale = None
rec = read_json(cfg['pidfile'])
if rec is not None:
    who, st = identify(rec)
    if who == 'ours':
        out({'ok': False, 'reason': 'running', 'pid': rec.get('pid'), 'started_at': rec.get('started_at')})
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
if os.path.exists(cfg['log']):
    os.replace(cfg['log'], cfg['log'] + '.1')
rm(cfg['exitfile'])
rm(cfg['stopping'])
env = dict(os.environ)
env.update(cfg['env'])
import subprocess
logf = open(cfg['log'], 'ab')
wcfg = {k: cfg[k] for k in ('argv', 'pidfile', 'exitfile', 'port', 'name', 'log')}
w = subprocess.Popen([sys.executable, '-c', cfg['wrapper'], json.dumps(wcfg)], stdin=subprocess.DEVNULL,
                     stdout=logf, stderr=subprocess.STDOUT, cwd=cfg['cwd'], env=env, start_new_session=True,
                     close_fds=True)
deadline = time.time() + 15
while time.time() < deadline:
    rec = read_json(cfg['pidfile'])
    if rec is not None:
        out({'ok': True, 'record': rec, 'stale': stale})
    ex = read_json(cfg['exitfile'])
    if ex is not None:
        out({'ok': False, 'reason': 'exec', 'exit': ex, 'tail': tail(cfg['log'], 20)})
    if w.poll() is not None and read_json(cfg['pidfile']) is None:
        out({'ok': False, 'reason': 'exec', 'exit': {'exit_code': w.returncode}, 'tail': tail(cfg['log'], 20)})
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
rec = read_json(cfg['pidfile'])
if rec is None:
    out({'ok': True, 'result': 'not-running'})
who, info = identify(rec)
pid = rec.get('pid')
if who != 'ours':
    rm(cfg['pidfile'])
    rm(cfg['stopping'])
    if who == 'dead':
        out({'ok': True, 'result': 'stale', 'pid': pid, 'exit': read_json(cfg['exitfile'])})
    out({'ok': False, 'result': who, 'pid': pid, 'cmd': info})
open(cfg['stopping'], 'w').close()
pgid = rec.get('pgid')
group = info['pgrp'] == pgid and pgid not in (None, 0, 1)
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
        return group_alive(pgid)
    w, _ = identify(rec)
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
out({'ok': gone, 'result': result if gone else 'survived', 'pid': pid, 'waited': round(time.time() - t0, 3)})
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
    rec = read_json(svc['pidfile'])
    if rec is None:
        return {'present': False}
    who, st = identify(rec)
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
