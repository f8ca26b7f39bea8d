"""A process of the folder-lock race test (tests/test_results_store.py): ``trials`` rounds, each
starting from a lock file left by a dead process, every process trying to take the lock at once."""

import json
import socket
import time
import warnings

from experiments.harness.store import LOCK_NAME, FolderLock, FolderLocked


def _slow_log(*args, **kwargs):
    time.sleep(0.002)                          # a warning written to a busy log file


def race(folder, rank, trials, dead_pid, barrier, holders, overlaps, wins):
    warnings.simplefilter("always")
    warnings.showwarning = _slow_log
    lock_file = folder / LOCK_NAME
    for _ in range(trials):
        barrier.wait()
        if rank == 0:                          # a lock left behind by a killed run
            lock_file.write_text(json.dumps({"pid": dead_pid, "host": socket.gethostname()}) + "\n")
        barrier.wait()
        lock = FolderLock(folder, f"racer {rank}")
        try:
            lock.acquire()
        except FolderLocked:
            continue
        with holders.get_lock():
            holders.value += 1
            if holders.value > 1:
                overlaps.value += 1
        with wins.get_lock():
            wins.value += 1
        time.sleep(0.01)
        with holders.get_lock():
            holders.value -= 1
        lock.release()
