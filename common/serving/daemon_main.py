"""`run_daemon`: the one life of both daemons, from a claimed start to exit 0 (start, serve, shut down once,
flush the todos with one deadline), over the `ServedEngine` protocol both engines implement."""

from __future__ import annotations

import threading
from typing import Protocol
from wsgiref.types import WSGIApplication

import click

from common.config import ServerSettings
from common.serving.serve import Listener, serve_daemon

# How long a stopping daemon waits for the harness to take its last todos (they stay in the outbox).
TODO_FLUSH_SECONDS = 5.0


class ServedEngine(Protocol):
    def open(self) -> None:
        """Take up what a previous daemon left (before the first call is served); OSError: the state
        directory cannot be used."""

    def shutdown(self) -> None:
        """Stop everything this daemon started; every todo it owes is queued when it returns."""


class OutgoingTodos(Protocol):
    def flush(self, timeout: float) -> bool: ...

    def close(self, timeout: float | None = None) -> None: ...


def run_daemon(app: WSGIApplication, settings: ServerSettings, engine: ServedEngine, todos: OutgoingTodos,
               listener: Listener | None = None) -> None:
    """Open the engine, serve `app` until SIGTERM/SIGINT, then shut down once: the engine first (while calls
    that wait still get their answer), then the todos, flushed within TODO_FLUSH_SECONDS and closed."""
    try:
        engine.open()
    except OSError as exc:  # e.g. the path runs through a regular file, or a read-only mount
        todos.close()
        raise click.ClickException(f"--state-dir {settings.state_dir}: cannot be used: {exc.strerror or exc}") from None
    stop = _StopOnce(engine, todos)
    try:
        serve_daemon(app, settings, on_stop=stop, listener=listener)
    finally:
        stop()  # the serving loop ended without a signal, or failed: the same stop, once


class _StopOnce:
    """The shutdown, run by whichever comes first (the signal's stopper thread or the end of serving); the
    other waits for it to finish."""

    def __init__(self, engine: ServedEngine, todos: OutgoingTodos):
        self._engine, self._todos = engine, todos
        self._lock = threading.Lock()
        self._done = False

    def __call__(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            try:
                self._engine.shutdown()
            finally:
                self._todos.flush(TODO_FLUSH_SECONDS)
                self._todos.close()
