"""Fixtures for the bash daemon's tests: an engine on a temp state dir, a todo recorder, an engine process."""


import pytest
from kit.hivebash_testkit import EngineProcess, TodoRecorder, settings

from hivebash.engine import Engine


@pytest.fixture
def todos():
    return TodoRecorder()


@pytest.fixture
def make_engine(tmp_path, todos):
    engines = []

    def make(**overrides):
        wait_cap = overrides.pop("wait_cap", 30.0)
        ops = overrides.pop("ops", None)
        engine = Engine(settings(tmp_path, **overrides), todos, wait_cap=wait_cap, ops=ops)
        engine.open()
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.shutdown(timeout=5)


@pytest.fixture
def engine(make_engine):
    return make_engine()


@pytest.fixture
def engine_process(tmp_path):
    started = []

    def start(**overrides):
        ep = EngineProcess(tmp_path / "state", **overrides)
        started.append(ep)
        return ep

    yield start
    for ep in started:
        ep.close()
        if ep.proc.poll() is None:
            ep.proc.kill()
            ep.proc.wait()
