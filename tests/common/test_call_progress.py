"""The pacing of progress notifications and the cancellation of a wait, on a clock of the test's own."""

import threading

import pytest

from common.protocol.call_progress import HEARTBEAT, LINE_POLL, MIN_GAP, Cancellation, Pacer, paced_wait


def test_none_in_the_first_gap_then_news_is_told_at_once():
    pacer = Pacer(started=100.0)
    assert not pacer.due(100.5, news=True)  # inside the wait's first MIN_GAP
    assert pacer.next_look(100.5) == MIN_GAP - 0.5  # nothing to look at before the gap ends
    assert pacer.due(100.0 + MIN_GAP, news=True)
    assert not pacer.due(100.0 + MIN_GAP + 0.5, news=True)  # at most one a MIN_GAP


def test_quiet_means_a_heartbeat_and_a_poll_for_news_in_between():
    pacer = Pacer(started=0.0)
    assert not pacer.due(MIN_GAP + 0.1, news=False)
    assert pacer.next_look(MIN_GAP + 0.1) == LINE_POLL  # news after a quiet gap is found within LINE_POLL
    assert pacer.due(HEARTBEAT, news=False)
    assert pacer.next_look(HEARTBEAT) == MIN_GAP


class _Reports:
    wanted = True

    def __init__(self):
        self.sent = []

    def report(self, progress, total, message):
        self.sent.append((progress, total, message))


@pytest.mark.slow
def test_paced_wait_reports_until_done_and_a_cancel_ends_it():
    cond, done, reports, cancel = threading.Condition(), [], _Reports(), Cancellation()
    now = [0.0]

    def clock():
        return now[0]

    def advance():  # each look moves the test's clock on, so the wait runs without sleeping
        now[0] += 0.25
        if now[0] >= 3.0:
            cancel.fire()
        return int(now[0])

    assert paced_wait(cond, lambda: bool(done), 10.0, reports, cancel, news=advance,
                      message=lambda waited: f"waited {waited}", clock=clock) is False
    assert cancel.fired and 1 <= len(reports.sent) <= 3, reports.sent
    assert all(total == 10.0 for _, total, _ in reports.sent)


def test_a_cancel_wakes_a_waiter_at_once():
    cond, cancel = threading.Condition(), Cancellation()
    ended = threading.Event()

    def waiter():
        paced_wait(cond, lambda: False, 30.0, _Reports(), cancel, news=lambda: 0, message=lambda w: "")
        ended.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    cancel.fire()
    assert ended.wait(5), "the cancel did not wake the wait"
    thread.join()
