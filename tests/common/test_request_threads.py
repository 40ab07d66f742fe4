"""Which idle request thread takes the next request (common/serving/request_threads.py): the one that went idle last."""

import threading

from daemon_harness import wait_until

from common.serving.request_threads import HotThreadDispatcher, MostRecentFirst


class _Job:
    """A waitress task that records the thread that served it."""

    def __init__(self, ran: list[int]):
        self.ran = ran

    def defer(self) -> None:
        pass

    def cancel(self) -> None:
        pass

    def service(self) -> None:
        self.ran.append(threading.get_ident())


def test_a_steady_load_runs_on_the_thread_that_went_idle_last():
    dispatcher = HotThreadDispatcher()
    dispatcher.set_thread_count(4)
    try:
        ran: list[int] = []
        for n in range(12):  # one request at a time, each after every thread is idle again
            wait_until(lambda: dispatcher.active_count == 0, 10, "the request threads to be idle")
            dispatcher.add_task(_Job(ran))
            wait_until(lambda n=n: len(ran) == n + 1, 10, "the request to be served")
        assert len(set(ran[1:])) == 1, f"requests went to {len(set(ran))} threads: the longest idle, not the last"
    finally:
        dispatcher.shutdown(timeout=5)


def test_notify_wakes_the_latest_waiter_and_notify_all_every_one():
    cv = MostRecentFirst()
    woke: list[str] = []

    def waiter(name: str) -> None:
        with cv:
            cv.wait(10)
            woke.append(name)

    threads = []
    for name in ("first", "second", "third"):
        t = threading.Thread(target=waiter, args=(name,))
        t.start()
        threads.append(t)
        count = len(threads)
        wait_until(lambda count=count: len(cv._waiters) == count, 10, f"{name} to wait")  # its waiter list
    with cv:
        cv.notify()
    wait_until(lambda: woke == ["third"], 10, "the latest waiter to wake")
    with cv:
        cv.notify_all()
    for t in threads:
        t.join(10)
    assert sorted(woke[1:]) == ["first", "second"]
