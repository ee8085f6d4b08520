"""The after-commit pushes, sent from a thread of the web app's process
(sheetsync/emit/push_thread.py)."""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
from types import SimpleNamespace

from sheetsync import emit_answer_submitted, wait_for_pushes
from sheetsync.emit.push_thread import Pushes, PushThread
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services
from sheetsync.settings import Settings

KEY = BufferKey("owner", "form_1", "sheet", 0)
OTHER = BufferKey("owner", "form_1", "other", 0)


class Recorder:
    """A send that records what it was given; held until released, to let commits queue."""

    def __init__(self) -> None:
        self.sent: list[Pushes] = []
        self.threads: set[str] = set()
        self.release = threading.Event()
        self.release.set()
        self.sending = threading.Event()

    def __call__(self, services: Services, pushes: Pushes) -> bool:
        self.sending.set()
        self.release.wait(5)
        self.threads.add(threading.current_thread().name)
        self.sent.append(pushes)
        return True


def test_commits_that_queue_up_go_in_one_push_per_buffer_in_commit_order() -> None:
    recorder = Recorder()
    thread = PushThread(recorder)
    services = object()  # the thread only hands them to the send
    recorder.release.clear()
    thread.submit(services, {(KEY, "q"): ["a0"]})
    assert recorder.sending.wait(5)  # the thread took it, and its send is held
    for n in range(1, 5):
        thread.submit(services, {(KEY, "q"): [f"a{n}"], (OTHER, "q"): [f"a{n}"]})
    recorder.release.set()
    assert thread.wait(5)
    assert recorder.sent == [
        {(KEY, "q"): ["a0"]},
        {(KEY, "q"): ["a1", "a2", "a3", "a4"], (OTHER, "q"): ["a1", "a2", "a3", "a4"]},
    ]
    assert recorder.threads == {"sheetsync-push"}


def test_a_full_queue_drops_the_push_and_the_request_returns_at_once(caplog) -> None:
    """The request never sends a push itself: past the queue's bound its ids are left to
    the reconciler (they are committed ENQUEUED), counted and logged without any id."""
    recorder = Recorder()
    thread = PushThread(recorder, max_waiting=1)
    recorder.release.clear()
    thread.submit(object(), {(KEY, "q"): ["a0"]})
    assert recorder.sending.wait(5)  # the thread took it, and its send is held
    thread.submit(object(), {(KEY, "q"): ["a1"]})  # queued: the queue is full
    with caplog.at_level(logging.WARNING, logger="sheetsync.emit.push_thread"):
        app = SimpleNamespace(settings=Settings.load(reconcile_after_s=600))
        caller = threading.Thread(
            target=thread.submit, args=(app, {(KEY, "q"): ["a2", "a3"]}), name="request"
        )
        caller.start()
        caller.join(2)
        returned = not caller.is_alive()
        recorder.release.set()
        caller.join(5)
    assert returned, "the request waited for the held push thread"
    assert thread.wait(5)
    assert [pushes[(KEY, "q")] for pushes in recorder.sent] == [["a0"], ["a1"]]
    assert recorder.threads == {"sheetsync-push"}
    assert thread.dropped == 2  # ids, not commits
    [line] = [r.getMessage() for r in caplog.records if r.name == "sheetsync.emit.push_thread"]
    assert "a2" not in line and "a3" not in line and "owner" not in line
    assert line.startswith(
        "push of 2 ids dropped: 1 commits already wait for the push thread; they stay ENQUEUED "
        "in the database, and beat's reconciler pushes them within about 15m 0s"
    ), line


def test_a_forked_child_pushes_from_a_thread_of_its_own() -> None:
    recorder = Recorder()
    thread = PushThread(recorder)
    thread.submit(object(), {(KEY, "q"): ["parent"]})
    assert thread.wait(5)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own thread sends its own pushes
        try:
            thread.submit(object(), {(KEY, "q"): ["child"]})
            ok = thread.wait(5) and recorder.sent[-1] == {(KEY, "q"): ["child"]}
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert recorder.sent == [{(KEY, "q"): ["parent"]}]


def test_a_child_forked_while_the_parent_starts_its_thread_does_not_hang() -> None:
    recorder = Recorder()
    thread = PushThread(recorder)
    read, write = os.pipe()
    with thread._lock:  # another thread of the parent, starting the parent's thread
        pid = os.fork()
        if pid == 0:
            try:
                thread.submit(object(), {(KEY, "q"): ["child"]})
                os.write(write, b"1" if thread.wait(5) else b"0")
            finally:
                os._exit(0)
    answered, _, _ = select.select([read], [], [], 10)
    if not answered:  # the child hangs on the lock it was forked with
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert answered, "the forked child hung"
    assert os.read(read, 1) == b"1"


def test_a_child_forked_while_the_parent_makes_its_first_thread_does_not_hang(monkeypatch):
    """The module's lock (the first emit making the process's thread) is new in a forked
    child too, and the fork hook is registered once, not once per thread."""
    from sheetsync.emit import push_thread as module

    monkeypatch.setattr(module, "_thread", None)
    read, write = os.pipe()
    with module._thread_lock:  # another thread of the parent, making the process's thread
        pid = os.fork()
        if pid == 0:
            try:
                made = module.push_thread(Recorder())
                os.write(write, b"1" if made is not None else b"0")
            finally:
                os._exit(0)
    answered, _, _ = select.select([read], [], [], 10)
    if not answered:  # the child hangs on the lock it was forked with
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert answered, "the forked child hung"
    assert os.read(read, 1) == b"1"


def test_the_fork_hook_is_registered_once_however_many_threads(monkeypatch):
    registered = []
    monkeypatch.setattr(os, "register_at_fork", lambda **hooks: registered.append(hooks))
    for _ in range(3):
        PushThread(Recorder())
    assert registered == []  # the module registered its one hook when it was imported


def test_an_emit_in_the_apps_transaction_reaches_redis_after_the_commit(world, pipeline):
    form = world.form()
    world.sheet(form)
    [answer_id] = world.answers(form, 1)
    with pipeline.sessions.begin() as session:
        result = emit_answer_submitted(answer_id, session=session)
    assert wait_for_pushes()
    [key] = result.enqueued
    assert pipeline.redis.lrange(key.buf, 0, -1) == [answer_id.encode()]
