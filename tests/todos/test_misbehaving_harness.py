"""TodoDelivery against harnesses that misbehave (an in-process fake; see FakeHarness for why): slow replies never
reach the caller, malformed or error replies count as not delivered, and per-key order survives concurrency
and retries."""

import random
import threading

import pytest

OK = b'{"ok":true}\n'


def summary_or_op(request: dict) -> tuple:
    return (request["op"], request["key"], request.get("summary"))


def test_a_slow_harness_never_slows_the_caller(fake_harness, make_todos):
    release = threading.Event()
    blocked = []

    def behave(n, request):
        if n == 0:
            blocked.append(n)
            release.wait(60)  # the harness sits on the first request until the test lets it go
        return OK

    harness = fake_harness(behave)
    le = make_todos(harness.path, timeout=120)
    try:
        assert le.upsert("a", "running", "")
        harness.wait_requests(1)  # the delivery thread is now stuck in the exchange
        # These return while the harness is still blocked: nothing a caller does waits for the socket.
        assert le.upsert("b", "done", "") is True
        assert le.clear("a") is True
        assert le.upsert("c", "done", "") is True
        assert le.flush(0) is False
        assert not release.is_set() and blocked == [0] and len(harness.requests) == 1
        assert le.status()["state"] == "sending"
    finally:
        release.set()
    assert le.flush(20)
    # a's upsert was on the wire when it was cleared, so its clear goes out, after b (changed before it).
    assert [summary_or_op(r) for r in harness.requests] == [
        ("todo.upsert", "a", "running"), ("todo.upsert", "b", "done"), ("todo.clear", "a", None),
        ("todo.upsert", "c", "done")]


BAD_REPLIES = {
    "not json": b"garbage\n",
    "not an object": b"[true]\n",
    "ok not a boolean": b'{"ok":"true"}\n',
    "error reply": b'{"ok":false,"error":"disk full"}\n',
    "ok missing": b'{"error":"who knows"}\n',
    "invalid utf-8": b'{"ok":\xff}\n',
    "no newline then close": b'{"ok":true}',
    "closed mid-reply": b'{"ok":',
    "closed without a word": None,
    "endless line": b"x" * (70 * 1024),
}


@pytest.mark.parametrize("bad", list(BAD_REPLIES), ids=list(BAD_REPLIES))
def test_a_malformed_or_error_reply_counts_as_not_delivered(fake_harness, make_todos, bad):
    harness = fake_harness(lambda n, request: BAD_REPLIES[bad] if n == 0 else OK)
    le = make_todos(harness.path)
    assert le.upsert("t1", "done exit=0", "Read(x)")
    assert le.flush(20)
    assert [summary_or_op(r) for r in harness.requests] == [("todo.upsert", "t1", "done exit=0")] * 2
    assert le.status()["last_error"]


def test_a_reply_that_never_comes_times_out_and_is_retried(fake_harness, make_todos):
    never = threading.Event()
    harness = fake_harness(lambda n, request: OK if n > 0 or never.wait(60) else OK)
    le = make_todos(harness.path, timeout=0.2)
    try:
        assert le.upsert("t1", "done", "")
        assert le.flush(20)
    finally:
        never.set()
    assert len(harness.requests) == 2
    assert "no reply" in le.status()["last_error"]


def test_a_refused_todo_does_not_hold_back_the_other_keys(fake_harness, make_todos):
    harness = fake_harness(lambda n, r: b'{"ok":false,"error":"no"}\n' if r["key"] == "stuck" else OK)
    le = make_todos(harness.path)
    le.upsert("stuck", "refused", "")
    le.upsert("other", "fine", "")
    assert le.wait_until(lambda: [r["key"] for r in harness.applied] == ["other"], 20), (
        "the other key was not delivered")
    # The harness applies before it answers: the acknowledgement may still be on its way back.
    assert le.wait_until(lambda: le.status()["pending"] == 1, 20), "the refused one waits, alone"
    assert [r["key"] for r in harness.applied] == ["other"]
    assert [r["key"] for r in harness.requests][:2] == ["stuck", "other"]


def expected_and_check(issued: list[tuple], applied: list[tuple]) -> None:
    """`applied` (with idempotent re-deliveries folded) must be a subsequence of `issued`, ending in its last
    state; a clear may also be the only thing left of an upsert+clear pair."""
    folded = [a for i, a in enumerate(applied) if i == 0 or applied[i - 1] != a]
    it = iter(issued)
    for event in folded:
        assert any(event == candidate for candidate in it), f"out of order: {event} in {folded} vs {issued}"
    final = issued[-1]
    if final[0] == "upsert":
        assert folded and folded[-1] == final, f"final state lost: {folded} vs {final}"
    else:
        assert not folded or folded[-1] == final, f"clear lost: {folded}"


def test_per_key_order_survives_concurrency_and_retries(fake_harness, make_todos):
    rng = random.Random(4)
    lock = threading.Lock()

    def behave(n, request):
        with lock:
            roll = rng.random()
        if roll < 0.2:
            return b'{"ok":false,"error":"busy"}\n'
        if roll < 0.25:
            return None  # hang up before applying it
        if roll < 0.3:
            return b""  # apply it, then hang up before answering: the daemon must resend (idempotent)
        return OK

    harness = fake_harness(behave)
    le = make_todos(harness.path, timeout=5)
    issued: dict[str, list[tuple]] = {}

    def producer(t: int) -> None:
        local = random.Random(t)
        keys = [f"k{t}-{i}" for i in range(3)]
        for key in keys:
            issued[key] = []
        for step in range(40):
            key = local.choice(keys)
            if local.random() < 0.3:
                le.clear(key)
                issued[key].append(("clear",))
            else:
                le.upsert(key, f"v{step}", "")
                issued[key].append(("upsert", f"v{step}"))

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert le.flush(60), le.status()
    with harness.cond:
        applied = list(harness.applied)
    assert len(applied) > 24  # it really went over the wire, retries included
    for key, ops in issued.items():
        seen = [("clear",) if r["op"] == "todo.clear" else ("upsert", r["summary"]) for r in applied if r["key"] == key]
        expected_and_check(ops, seen)


@pytest.mark.parametrize("while_on_the_wire", [["clear"], ["upsert", "clear"]], ids=["clear", "upsert-then-clear"])
def test_a_clear_while_its_upsert_is_on_the_wire_is_still_sent(fake_harness, make_todos, while_on_the_wire):
    release = threading.Event()
    harness = fake_harness(lambda n, request: OK if n != 2 or release.wait(60) else OK)
    le = make_todos(harness.path, timeout=120)
    le.upsert("k", "v0", "")
    assert le.flush(20)
    le.clear("k")
    assert le.flush(20)  # acknowledged clear: this process knows the harness holds nothing for k
    try:
        le.upsert("k", "v1", "")
        harness.wait_requests(3)  # v1 is on the wire: the harness may apply it whatever happens next
        for op in while_on_the_wire:
            le.upsert("k", "v2", "") if op == "upsert" else le.clear("k")
    finally:
        release.set()
    assert le.flush(20)
    assert [summary_or_op(r) for r in harness.requests[2:]] == [("todo.upsert", "k", "v1"), ("todo.clear", "k", None)]
