"""Issue 27: the traps a model met in the calls that follow a first answer, each reproduced through the official
Python SDK client against a real hive-bash-daemon (the answer's text is what matters), then fixed."""

from __future__ import annotations

import pytest
from daemon_harness import start_daemon, todo_sink
from sdk_agent import SdkAgent, bash_daemon_argv

from common.notices import Notices, promises_a_notice
from hivesubagent import tools as subagent_tools


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon without a harness socket (no todo can reach the agent)."""
    root = tmp_path_factory.mktemp("traps")
    d = start_daemon(bash_daemon_argv(root / "state"), root)
    yield d
    d.stop()


@pytest.fixture(scope="module")
def agent(daemon):
    a = SdkAgent(daemon.url)
    yield a
    a.close()


@pytest.fixture(scope="module")
def noticed(tmp_path_factory):
    """A daemon whose completions go to the reference harness sink, and its agent."""
    root = tmp_path_factory.mktemp("noticed")
    with todo_sink() as sock:
        d = start_daemon(bash_daemon_argv(root / "state", "--agent-socket", str(sock)), root)
        a = SdkAgent(d.url)
        yield a
        a.close()
        d.stop()


# ----- deliverable 5 and 11: no promised todo without a socket; the server's instructions ---------------------

def test_without_a_socket_kill_and_every_description_promise_no_todo(agent):
    for name, tool in agent.tools().items():
        assert not promises_a_notice(tool["description"]), (name, tool["description"])
    agent.call("run", cmd="sleep 30", name="k5", wait_seconds=0)
    text = agent.call("kill", id="k5")
    assert not promises_a_notice(text), text
    assert 'status(id="k5"' in text
    assert not promises_a_notice(agent.instructions)


def test_the_instructions_say_how_to_work_with_each_server(agent, noticed, daemon):
    legacy = SdkAgent(daemon.url, mode="legacy")  # the initialize handshake carries them too
    legacy.close()
    assert legacy.instructions == agent.instructions
    for text in (agent.instructions, noticed.instructions):
        assert "already runs its command in the background" in text and "do not end `cmd` with `&`" in text
        assert "not with `Read` of an output file" in text
    assert "reports its end as a todo" in noticed.instructions
    assert "No completion notice reaches you (no harness socket is configured)" in agent.instructions
    assert "todo" in noticed.tools()["kill"]["description"]


def test_the_subagent_instructions_follow_the_same_rule():
    with_socket = subagent_tools.instructions(Notices(True))
    without = subagent_tools.instructions(Notices(False))
    assert "arrives as a todo" in with_socket and not promises_a_notice(without)
    assert "in the background" in without and "`status(name" in without  # the call that waits for it
    assert subagent_tools.build_registry(None).instructions == with_socket


def test_a_text_that_breaks_the_rule_is_refused():
    with pytest.raises(ValueError, match="promises a todo"):
        Notices(False).say("x", "its end arrives as a todo")
    assert Notices(True).say("a todo comes", "check with status") == "a todo comes"
