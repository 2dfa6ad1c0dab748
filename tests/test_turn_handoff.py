"""The supervisor hands the device's turn on from a worker started ahead as soon as that
worker says its measurement is over (harness.study.pipeline): it reads such a worker's pipe
ahead of time (`WorkerProcess.peek`) and looks for the event (`said`) without taking it, so
the worker's events still come out of `next_event` in order, each judged, when it becomes the
current one. Checked on a real worker process."""

from __future__ import annotations

import pytest

from harness.study.workerproc import WorkerDied, WorkerProcess

pytestmark = pytest.mark.study


def test_a_peeked_event_is_seen_early_and_still_taken_in_order() -> None:
    worker = WorkerProcess(1)
    try:
        worker.send("no_such_op")  # the worker says `error` and exits
        assert worker.proc.wait(timeout=60) == 2
        worker.peek()
        assert worker.said("error") and not worker.said("turn_over")
        assert worker.ended  # its pipe reached its end: the supervisor stops watching it
        with pytest.raises(WorkerDied, match="unknown op"):
            worker.next_event(within=5)  # the event peeked at is still there, and judged
    finally:
        worker.close()


def test_a_line_with_another_token_is_never_taken_for_the_worker_s_event() -> None:
    worker = WorkerProcess(1)
    try:
        forged = b'{"event": "turn_over", "token": "not-the-worker-s"}\n'
        worker.buffer += forged  # as if a program had written it on the pipe
        assert not worker.said("turn_over")
    finally:
        worker.kill()
        worker.close()
