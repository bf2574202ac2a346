"""Parallel delivery (docs/runtime.md §4.10): tasks on a bounded pool of worker threads while the
calling thread, which owns the database connection, serves every call the workers hand it.

A drain's work for one pane is tmux subprocess calls and sleeps (the settle, the verification's
captures), so threads overlap it well. The database is not shared: a worker that needs a read or
a write (select the next message, recheck, stamp) or a caller's hook (the loop's heartbeat)
hands the call to the coordinator and waits for its answer, still holding its pane lock. So one
connection, on one thread, makes every write, and a stamp still happens under the lock of the
pane that was typed into, after the verification.

Standard library only; imported only when a drain has more than one pane to type into.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from cafleet.errors import CafleetError

T = TypeVar("T")
CLOSED_CHECK = 0.5  # seconds between a waiting worker's checks that the coordinator still serves
R = TypeVar("R")


class CoordinatorClosed(CafleetError):
    """The coordinator stopped serving (its thread raised): a worker's call cannot be answered."""


class Coordinator:
    """Runs tasks on worker threads; the thread that built it answers their calls."""

    def __init__(self) -> None:
        self._owner = threading.get_ident()
        # (fn, args, kwargs, answer) for a call; (None, index, None, None) when task `index` ended.
        self._queue: queue.SimpleQueue[tuple[Any, Any, Any, Any]] = queue.SimpleQueue()
        self._closed = False

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the coordinator's thread; the caller waits for it. On that
        thread itself it simply runs."""
        if threading.get_ident() == self._owner:
            return fn(*args, **kwargs)
        if self._closed:
            raise CoordinatorClosed("the delivery coordinator stopped")
        answer: Future[T] = Future()
        self._queue.put((fn, args, kwargs, answer))
        while True:
            try:
                return answer.result(timeout=CLOSED_CHECK)
            except TimeoutError:
                # Not answered yet: fine while the coordinator serves; once it stopped, the call
                # is withdrawn (cancel fails only when it is already running: keep waiting).
                if self._stopped() and answer.cancel():
                    raise CoordinatorClosed("the delivery coordinator stopped") from None

    def run(
        self,
        tasks: Sequence[Callable[[], R]],
        workers: int,
        on_done: Callable[[int, R], object] | None = None,
    ) -> list[R]:
        """Run ``tasks`` on at most ``workers`` threads, serving their calls until every task
        ended; ``on_done(index, result)`` runs here as each one ends. Returns the results in
        task order; the first exception (in task order) is raised once every task ended."""
        futures: list[Future[R]] = []
        with ThreadPoolExecutor(
            max_workers=max(1, min(workers, len(tasks))), thread_name_prefix="cafleet-delivery"
        ) as pool:
            for index, task in enumerate(tasks):
                futures.append(pool.submit(self._task, index, task))
            try:
                self._serve(futures, on_done)
            finally:
                self._close()
        results: list[R] = []
        for future in futures:
            results.append(future.result())  # raises the first failure, in task order
        return results

    def _task(self, index: int, task: Callable[[], R]) -> R:
        try:
            return task()
        finally:
            self._queue.put((None, index, None, None))

    def _serve(self, futures: list[Future[R]], on_done: Callable[[int, R], object] | None) -> None:
        remaining = len(futures)
        while remaining:
            fn, args, kwargs, answer = self._queue.get()
            if fn is None:
                remaining -= 1
                future = futures[args]
                if on_done is not None and future.exception() is None:
                    on_done(args, future.result())
                continue
            if not answer.set_running_or_notify_cancel():
                continue
            try:
                answer.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed back to the worker, which raises it
                answer.set_exception(exc)

    def _stopped(self) -> bool:
        return self._closed

    def _close(self) -> None:
        """Refuse further calls and fail the ones still queued, so no worker waits forever when
        this thread stops serving early (the pool's exit then waits for the workers)."""
        self._closed = True
        while True:
            try:
                fn, _args, _kwargs, answer = self._queue.get_nowait()
            except queue.Empty:
                return
            if fn is not None and answer.set_running_or_notify_cancel():
                answer.set_exception(CoordinatorClosed("the delivery coordinator stopped"))


__all__ = ["Coordinator", "CoordinatorClosed"]
