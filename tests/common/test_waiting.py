"""Bounded waits: the deadline (with a fake clock, no sleeps), waking on notify, the cap, and the wait slots."""

import threading

import pytest
from kit.clock import FakeClock

from common.waiting import DEFAULT_WAIT_SECONDS, WAIT_CAP_SECONDS, WaitSlots, cap_wait, wait_for


class ClockedCondition:
    """Stands in for threading.Condition where a test needs time to pass without sleeping: each wait(t)
    moves the fake clock on by `step(t)` (a spurious early wake-up when less than t) and records t."""

    def __init__(self, clock, step=lambda timeout: timeout, on_wait=None):
        self.clock, self.step, self.on_wait = clock, step, on_wait
        self.timeouts = []

    def wait(self, timeout=None):
        self.timeouts.append(timeout)
        self.clock.now += self.step(timeout)
        if self.on_wait:
            self.on_wait()
        return True


def test_false_predicate_waits_exactly_the_window_and_returns_false():
    clock = FakeClock(500.0)
    cond = ClockedCondition(clock)
    assert wait_for(cond, lambda: False, 5.0, clock) is False
    assert cond.timeouts == [5.0] and clock.now == 505.0


def test_spurious_wakeups_never_stretch_the_deadline():
    clock = FakeClock(500.0)
    cond = ClockedCondition(clock, step=lambda timeout: 1.5)  # woken early every time
    assert wait_for(cond, lambda: False, 5.0, clock) is False
    assert cond.timeouts == [5.0, 3.5, 2.0, 0.5], "each wait is for what remains of one fixed deadline"
    assert clock.now == 506.0  # the last wake-up overshot; no wait is started past the deadline


def test_true_predicate_returns_at_once_without_waiting():
    clock = FakeClock(500.0)
    cond = ClockedCondition(clock)
    assert wait_for(cond, lambda: True, 5.0, clock) is True
    assert cond.timeouts == []


def test_zero_window_checks_once():
    clock = FakeClock(500.0)
    cond = ClockedCondition(clock)
    assert wait_for(cond, lambda: False, 0.0, clock) is False
    assert cond.timeouts == []


def test_predicate_turning_true_during_the_wait_ends_it():
    clock = FakeClock(500.0)
    state = {"done": False}
    cond = ClockedCondition(clock, step=lambda t: 1.0, on_wait=lambda: state.update(done=clock.now >= 502.0))
    assert wait_for(cond, lambda: state["done"], 30.0, clock) is True
    assert len(cond.timeouts) == 2


def test_notify_wakes_a_real_waiter_at_once():
    """A real Condition and thread: the waiter asks for an hour; only notify_all can end it within the join
    below. (Not a speed assertion: without the wake-up the waiter would still be waiting for 3600 s.)"""
    cond = threading.Condition()
    state = {"done": False, "result": None}
    waiting = threading.Event()

    def waiter():
        with cond:
            waiting.set()
            state["result"] = wait_for(cond, lambda: state["done"], 3600.0)

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    assert waiting.wait(10)
    with cond:  # the waiter released the lock inside cond.wait, so this cannot race its predicate check
        state["done"] = True
        cond.notify_all()
    thread.join(30)
    assert not thread.is_alive(), "notify_all did not wake the waiter"
    assert state["result"] is True


@pytest.mark.parametrize("asked,seconds,capped", [
    (None, DEFAULT_WAIT_SECONDS, False),
    (0, 0.0, False),
    (12.5, 12.5, False),
    (WAIT_CAP_SECONDS, WAIT_CAP_SECONDS, False),
    (WAIT_CAP_SECONDS + 0.1, WAIT_CAP_SECONDS, True),
    (10_000, WAIT_CAP_SECONDS, True),
])
def test_cap_wait(asked, seconds, capped):
    window = cap_wait(asked)
    assert (window.seconds, window.capped) == (seconds, capped)
    assert window.asked == (DEFAULT_WAIT_SECONDS if asked is None else asked)


def test_cap_wait_custom_default_and_cap():
    assert cap_wait(None, default=7, cap=5).seconds == 5 and cap_wait(None, default=7, cap=5).capped


def test_wait_slots_bound_and_release():
    slots = WaitSlots(2)
    assert slots.try_acquire() and slots.try_acquire()
    assert slots.try_acquire() is False, "a full set of slots answers at once instead of blocking"
    slots.release()
    assert slots.try_acquire() is True, "a released slot is granted again"
    assert slots.try_acquire() is False, "and only that one"


def test_wait_slots_zero_limit_never_grants():
    slots = WaitSlots(0)
    assert slots.try_acquire() is False


def test_wait_slots_held_is_the_rule_as_one_block():
    slots = WaitSlots(1)
    with slots.held() as first:
        with slots.held() as second:
            assert (first, second) == (True, False), "the second waiter answers at once"
        assert slots.try_acquire() is False, "a refused block releases nothing"
    assert slots.try_acquire() is True, "the slot is free again after the block"
    slots.release()
    with pytest.raises(KeyError), slots.held():
        raise KeyError("an error inside the wait")
    assert slots.try_acquire() is True, "and after a block that raised"


def test_wait_slots_refuse_misuse():
    with pytest.raises(ValueError, match="limit"):
        WaitSlots(-1)
    with pytest.raises(RuntimeError, match="without acquire"):
        WaitSlots(3).release()


def test_wait_slots_never_oversubscribed_under_contention():
    slots = WaitSlots(3)
    start = threading.Barrier(10)
    held = {"now": 0, "max": 0}  # counted by the holders themselves, between their acquire and release
    lock = threading.Lock()

    def worker():
        start.wait()
        for _ in range(500):
            if slots.try_acquire():
                with lock:
                    held["now"] += 1
                    held["max"] = max(held["max"], held["now"])
                with lock:
                    held["now"] -= 1
                slots.release()

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= held["max"] <= 3
    assert all(slots.try_acquire() for _ in range(3)) and not slots.try_acquire(), "every slot came back"
