"""No process a test starts outlives the pytest process that started it.

A pytest process that ends normally stops what it started: fixtures' finalisers, and
``atexit`` for this process's ``redis-server`` (``support.redis_dbs``). One that is
killed runs none of that: SIGKILL, SIGTERM from ``timeout`` or a cancelled CI job (Python
does not run ``atexit`` on a signal it does not handle), a pytest-xdist worker that
crashes. Its children, most started in a session of their own (``start_new_session``, so a
Ctrl-C or a test's ``killpg`` cannot reach them), are then reparented to init and run on:
a CI run left four ``redis-server``s behind, one per pytest process of ``make test``.

So every long-lived child a test helper starts asks the kernel for SIGKILL when its
parent dies: ``prctl(PR_SET_PDEATHSIG)``, set by util-linux's ``setpriv --pdeathsig KILL``
just before it executes the command (the setting survives ``exec``). Wrap the command:
``subprocess.Popen(dies_with_this_process([...]), ...)``. ``setpriv`` rather than a
``preexec_fn``: no Python code runs between fork and exec in a process full of threads.
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Sequence

_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None


def dies_with_this_process(command: Sequence[str]) -> list[str]:
    """``command`` run so that it gets SIGKILL when this process dies, however it dies.

    Unchanged off Linux or without ``setpriv``, and when called off the main thread: the
    kernel sends the signal when the *thread* that forked the child ends, and only the main
    thread lasts as long as the process (a helper thread's child would die with the
    thread). Then the caller's own stop (a finaliser, ``atexit``) is all there is.
    """
    if _SETPRIV is None or threading.current_thread() is not threading.main_thread():
        return list(command)
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *command]
