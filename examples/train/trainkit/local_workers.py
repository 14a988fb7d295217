"""Run a command as N Horovod workers on this machine, everything on 127.0.0.1.

`horovodrun --gloo -np 2 -H localhost:2 python train.py` does the same, but its
rendezvous server listens on every interface; tests and benchmarks start the
server on the loopback address themselves and give each worker the
environment horovodrun would (rank, sizes, rendezvous address, Gloo on `lo`).
A worker that crashes prints every thread's Python stack (faulthandler).
"""
import os
import signal
import subprocess
import tempfile
import threading
import time

from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

LOOPBACK = "127.0.0.1"


class WorkersFailed(RuntimeError):
    pass


def run(command, size=2, env=None, timeout=600, cwd=None):
    """Run `command` (an argv list) as `size` workers; returns each rank's
    (stdout, stderr). A worker that fails or a run past `timeout` seconds stops
    the other workers (they would wait in a collective) and raises WorkersFailed
    with every worker's output."""
    server = RendezvousHTTPServer((LOOPBACK, 0), RendezvousHandler, False)
    plan = get_host_assignments(parse_hosts("localhost:%d" % size), size)
    server.init(plan)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = dict(os.environ if env is None else env,
                HOROVOD_GLOO_RENDEZVOUS_ADDR=LOOPBACK,
                HOROVOD_GLOO_RENDEZVOUS_PORT=str(server.server_address[1]),
                HOROVOD_CONTROLLER="gloo", HOROVOD_CPU_OPERATIONS="gloo", HOROVOD_GLOO_IFACE="lo",
                # Installed before MXNet loads, faulthandler keeps MXNet's own handler
                # out, which prints "Segmentation fault" and no stack.
                PYTHONFAULTHANDLER="1")
    with tempfile.TemporaryDirectory() as logs:
        workers = []
        try:
            for slot in plan:
                worker_env = dict(base, HOROVOD_HOSTNAME=slot.hostname,
                                  HOROVOD_RANK=str(slot.rank), HOROVOD_SIZE=str(slot.size),
                                  HOROVOD_LOCAL_RANK=str(slot.local_rank),
                                  HOROVOD_LOCAL_SIZE=str(slot.local_size),
                                  HOROVOD_CROSS_RANK=str(slot.cross_rank),
                                  HOROVOD_CROSS_SIZE=str(slot.cross_size))
                out = open(os.path.join(logs, "%d.out" % slot.rank), "w+")
                err = open(os.path.join(logs, "%d.err" % slot.rank), "w+")
                workers.append((subprocess.Popen(command, env=worker_env, cwd=cwd, stdout=out,
                                                 stderr=err), out, err))
            failure = _wait(workers, timeout)
        finally:
            for process, _, _ in workers:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            server.shutdown()
            server.server_close()
        outputs = []
        for _, out, err in workers:
            out.seek(0)
            err.seek(0)
            outputs.append((out.read(), err.read()))
            out.close()
            err.close()
    if failure:
        raise WorkersFailed("%s: %s\n%s" % (" ".join(command), failure, "\n".join(
            "--- rank %d stdout:\n%s\n--- rank %d stderr:\n%s" % (rank, o, rank, _shown(e))
            for rank, (o, e) in enumerate(outputs))))
    return outputs


def _shown(stderr):
    """The end of a worker's stderr, without faulthandler's list of extension
    modules (thousands of characters after the stacks)."""
    return "\n".join(line for line in stderr.splitlines()
                     if not line.startswith("Extension modules:"))[-6000:]


def _wait(workers, timeout):
    """None when every worker exited 0, else what went wrong first."""
    deadline = time.monotonic() + timeout
    while True:
        codes = [process.poll() for process, _, _ in workers]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            rank, code = failed[0]
            if code < 0:
                return "rank %d was killed by %s" % (rank, signal.Signals(-code).name)
            return "rank %d exited with status %d" % (rank, code)
        if all(code == 0 for code in codes):
            return None
        if time.monotonic() > deadline:
            return "still running after %d s" % timeout
        time.sleep(0.05)
