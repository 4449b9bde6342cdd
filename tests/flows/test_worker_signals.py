"""A process pool's workers and the terminal's Ctrl-C, which reaches every process of the
foreground group: a worker still starting (its interpreter importing modules, before any
initializer of its own runs) must not die of it with a traceback. The Ctrl-C test of a whole run
(tests/flows/test_interrupt.py) met that only when the machine was busy enough to slow a
worker's start; here the signal is sent while the worker starts, every time."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

from flows.runtime import BlockedSpawnContext, process_pool_task_runner


def _started_and_interrupted(context) -> int:
    """The exit code of a spawned process (sleeping half a second) sent SIGINT every 10 ms from
    the moment it is started until it ends: the signals come while it starts and while it sleeps.
    (A signal that comes before the child has replaced itself with a new interpreter meets the
    handler it inherited from this process and is lost, so one signal alone was not enough: the
    plain spawned process of the test below outlived one that came that early.)"""
    # As from a terminal: this process handles Ctrl-C and does not block it, so its children do
    # not start with it ignored or blocked (a process hands both to the processes it starts, and a
    # test run in worker processes may have either: a fresh-clone run found the plain child below
    # outliving it).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        process = context.Process(target=time.sleep, args=(0.5,))
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 60
    while process.exitcode is None and time.monotonic() < deadline:
        try:
            os.kill(process.pid, signal.SIGINT)
        except ProcessLookupError:
            break
        process.join(0.01)
    process.join(120)
    return process.exitcode


def test_a_worker_started_with_ctrl_c_blocked_outlives_a_ctrl_c_during_its_start():
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    assert _started_and_interrupted(BlockedSpawnContext()) == 0
    # the plain spawn method: the same Ctrl-C ends the process
    assert _started_and_interrupted(multiprocessing.get_context("spawn")) != 0
    # the starting thread's own mask is as it was
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before


def test_the_process_pool_runner_starts_its_workers_so():
    runner = process_pool_task_runner(2)
    with runner:
        assert isinstance(runner._executor._mp_context, BlockedSpawnContext)
    assert type(runner.duplicate()) is type(runner)  # each stage's flow enters a duplicate
