"""The stream tap: it returns every chunk unchanged, copies up to its cap, and never raises."""

import pytest

from tooltap.addon.proxy.tap import StreamTap


def tap(limit=10, fault=None):
    errors = []
    return StreamTap(limit, errors.append, fault), errors


def test_every_chunk_is_returned_unchanged_and_copied_up_to_the_cap():
    stream, errors = tap()
    for chunk in (b"data: ", b"{}\n\n", b""):
        assert stream(chunk) is chunk
    assert (stream.chunks, stream.size, stream.overflow, errors) == (
        [b"data: ", b"{}\n\n"],
        10,
        False,
        [],
    )


def test_past_the_cap_the_copy_is_dropped_and_the_bytes_still_go_by():
    stream, _ = tap(limit=8)
    assert stream(b"12345") == b"12345"
    assert stream(b"67890") == b"67890"
    assert stream(b"more") == b"more"
    assert (stream.chunks, stream.overflow) == ([], True)


def test_a_fault_inside_is_counted_marks_the_tap_failed_and_the_chunk_goes_by():
    def fault(where):
        raise RuntimeError(f"boom in the {where}")

    stream, errors = tap(fault=fault)
    assert stream(b"data: {}\n\n") == b"data: {}\n\n"
    assert stream.failed
    assert [str(e) for e in errors] == ["boom in the tap"]


def test_an_error_handler_that_raises_does_not_break_the_stream_either():
    def fault(where):
        raise RuntimeError(where)

    def on_error(exc):
        raise ValueError("the counter is broken too")

    assert StreamTap(10, on_error, fault)(b"x") == b"x"


@pytest.mark.parametrize("signal", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_is_not_swallowed(signal):
    def fault(where):
        raise signal

    stream, errors = tap(fault=fault)
    with pytest.raises(signal):
        stream(b"x")
    assert errors == []


def test_once_let_go_it_copies_nothing_more_and_takes_no_budget():
    from tooltap.addon.handover.budget import Budget

    budget = Budget(1_000)
    stream = StreamTap(100, lambda _e: None, budget=budget)
    stream(b"abc")
    stream.release()  # the flow was forgotten while its stream still runs
    assert stream(b"defgh") == b"defgh"
    assert (stream.chunks, budget.used) == ([], 0)
