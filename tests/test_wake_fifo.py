"""The named pipe through which a tuned SuperNode wakes its warm executor (``--wake-fifo``)."""

import os
import stat
import threading
import time

import pytest

from fedcausal_flwr.federation.deployment import tuned_supernode, warm_executor
from fedcausal_flwr.federation.deployment.wake_fifo import WakeFifo, wake
from fedcausal_flwr.federation.deployment.warm_executor import Stop, WarmExecutor
from fedcausal_flwr.federation.runtime import flower_internals


class TaskAfterWake:
    """No task until ``ready`` is set; then one, then the executor stops once it is done."""

    def __init__(self):
        self.ready = threading.Event()
        self.claims_before = 0
        self.ready_at = self.claimed_at = 0.0
        self.executor: WarmExecutor | None = None

    def acquire(self):
        if not self.ready.is_set():
            self.claims_before += 1
            return None
        if not self.claimed_at:
            self.claimed_at = time.monotonic()
            return "token", 7
        if not self.executor.children:
            raise Stop("done")
        return None

    def close(self):
        pass


def test_a_woken_executor_claims_the_task_at_once(tmp_path):
    """With a 60 s poll interval, a task made available and announced through the pipe is
    claimed within seconds, after a single look before it; its child is collected soon after it
    ends (while a child runs the executor looks every 0.05 s), and the executor removes the pipe
    it created when it stops."""
    path = tmp_path / "node0.wake"
    fifo = WakeFifo(path)
    assert stat.S_ISFIFO(os.stat(path).st_mode) and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    source = TaskAfterWake()
    executor = WarmExecutor(source, lambda token: 0, poll_interval=60, wake_fifo=fifo)  # type: ignore[arg-type]
    source.executor = executor

    def announce():
        time.sleep(0.5)
        source.ready_at = time.monotonic()
        source.ready.set()
        wake(path)

    thread = threading.Thread(target=announce)
    thread.start()
    try:
        executor.serve()
    finally:
        thread.join()
    stopped_at = time.monotonic()
    assert executor.tasks == 1 and source.claims_before == 1
    assert source.claimed_at - source.ready_at < 10  # not the 60 s poll
    assert stopped_at - source.claimed_at < 10  # the child collected without a wake-up
    assert not path.exists()


def test_the_wake_fifo_touches_nothing_but_a_named_pipe(tmp_path):
    """``wake`` on a missing path, on a pipe nobody reads, on a full pipe and on a regular file
    does nothing (the file keeps its content); the executor's end refuses a path that is not a
    pipe, keeps a pipe it did not create, and reads what is pending at once."""
    wake(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()
    unread = tmp_path / "unread.wake"
    os.mkfifo(unread)
    wake(unread)  # no reader: nothing blocks, nothing raised
    regular = tmp_path / "file.wake"
    regular.write_text("data")
    wake(regular)
    assert regular.read_text() == "data"
    with pytest.raises(ValueError, match="not a named pipe"):
        WakeFifo(regular)
    fifo = WakeFifo(unread)
    assert not fifo.wait(0.01)
    wake(unread)
    wake(unread)
    assert fifo.wait(5) and not fifo.wait(0.01)
    try:  # a full pipe: a wake-up is pending, and wake() neither blocks nor raises
        while True:
            os.write(fifo.fd, b"\x01" * 4096)
    except BlockingIOError:
        pass
    wake(unread)
    assert fifo.wait(5) and not fifo.wait(0.01)  # drained at once
    fifo.close()
    assert unread.exists()  # not created by it: left in place


def test_the_tuned_supernode_wakes_its_executor_only_for_a_stored_message(tmp_path, monkeypatch):
    """``--wake-fifo``: the loop's pull-and-store is wrapped so that a pull that stored a message
    writes to the pipe and an empty pull does not; without the option the loop's own function
    stays."""
    loop = __import__(flower_internals.SUPERNODE_LOOP_MODULE, fromlist=["_"])
    monkeypatch.setattr(loop, "time", loop.time)
    monkeypatch.setattr(loop, "pull_objects", loop.pull_objects)
    pulled = iter([None, 12])
    monkeypatch.setattr(loop, "_pull_and_store_message", lambda **kwargs: next(pulled))
    monkeypatch.setattr(flower_internals, "run_flower_supernode", lambda: None)
    unwrapped = loop._pull_and_store_message
    tuned_supernode.main(["--insecure"])
    assert loop._pull_and_store_message is unwrapped
    path = tmp_path / "node.wake"
    fifo = WakeFifo(path)
    tuned_supernode.main(["--insecure", "--wake-fifo", str(path)])
    assert loop._pull_and_store_message(state=None) is None and not fifo.wait(0.05)
    assert loop._pull_and_store_message(state=None) == 12 and fifo.wait(5)
    fifo.close()


def test_the_executor_refuses_a_wake_fifo_it_cannot_use(tmp_path, capsys):
    """``--wake-fifo`` with ``--app serverapp`` (a SuperLink has no SuperNode to wake it) is
    refused, as is a path that is not a named pipe, in one line naming the option."""
    argv = ["--insecure", "--runtime-api-address", "127.0.0.1:1"]
    with pytest.raises(SystemExit):
        warm_executor.main([*argv, "--app", "serverapp", "--wake-fifo", str(tmp_path / "w")])
    assert "--wake-fifo is a SuperNode's" in capsys.readouterr().err
    regular = tmp_path / "file"
    regular.write_text("")
    with pytest.raises(SystemExit) as stop:
        warm_executor.main([*argv, "--wake-fifo", str(regular)])
    assert str(stop.value.code) == (
        f"fedcausal-executor: --wake-fifo {regular}: it exists and is not a named pipe"
    )
