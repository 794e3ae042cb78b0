"""The times the proxy would give recorded exchanges, which the corpus keeps none of."""

from __future__ import annotations

from tooltap.core import Exchange

T0 = 1_764_480_000.0  # the first exchange's time


def given_times(exchanges: list[Exchange]) -> list[Exchange]:
    """The exchanges, in order, one a second, each request received in 10 ms and answered
    200 ms after it began. A call one exchange issues and a later one answers is then timed, as
    on live traffic (the session's tool time)."""
    return [
        exchange.model_copy(
            update={
                "request_start": T0 + index,
                "request_end": T0 + index + 0.01,
                "response_end": T0 + index + 0.2,
            }
        )
        for index, exchange in enumerate(exchanges)
    ]
