"""`kill -USR1` logs what every pending task of a running server waits at
(app/ops/task_stacks.py): a real `engram serve` process, a real signal."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.procs import ServerProcess


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 here")
def test_sigusr1_logs_each_pending_task_and_the_server_goes_on(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server:
        os.kill(server.pid, signal.SIGUSR1)
        assert server.wait_for_log("task_stacks", timeout=30), server.log_tail()
        log = server.log_path.read_text(errors="replace")
        # The store worker, waiting for its queue: named, with its chain of awaits down
        # to the one it waits in (not only its own frame's line).
        worker = log.split("--- store-builds", 1)[1].split("---", 1)[0]
        assert "in _run_queue" in worker and "queues.py" in worker, worker
        assert "waits on" in worker, worker
        assert server.running
        server.wait_ready(timeout=30)
