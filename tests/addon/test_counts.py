"""The counts only the proxy makes (drops, errors in hooks and the tap), on exact fresh registries."""

import os

from tooltap.addon.handover.counts import DirectCounts, SharedCounts


def flows(metrics, api, outcome):
    return metrics.registry.get_sample_value(
        "tooltap_flows_total", {"api": api, "outcome": outcome}
    )


def errors(metrics, where):
    return metrics.registry.get_sample_value("tooltap_internal_errors_total", {"where": where})


def test_thread_mode_counts_straight_into_the_metrics(metrics):
    counts = DirectCounts(metrics)
    counts.dropped("chat")
    counts.dropped("responses", 3)
    counts.error("tap")
    assert (flows(metrics, "chat", "dropped"), flows(metrics, "responses", "dropped")) == (1, 3)
    assert (errors(metrics, "tap"), errors(metrics, "hook")) == (1, 0)


def test_the_child_folds_what_the_proxy_counted_exactly_once(metrics):
    proxy = SharedCounts()
    child = SharedCounts(os.dup(proxy.fd))  # the child's view of the same table
    try:
        proxy.dropped("messages", 2)
        proxy.dropped("not-an-api")
        proxy.error("hook")
        child.fold_into(metrics)
        child.fold_into(metrics)  # nothing new: nothing added
        assert flows(metrics, "messages", "dropped") == 2
        assert flows(metrics, "none", "dropped") == 1
        assert errors(metrics, "hook") == 1
        proxy.error("hook")
        child.fold_into(metrics)
        assert errors(metrics, "hook") == 2
    finally:
        child.close()
        proxy.close()


def test_what_a_dead_child_never_counted_is_carried_to_the_next_one(metrics):
    old = SharedCounts()
    child = SharedCounts(os.dup(old.fd))
    new = SharedCounts()
    try:
        old.dropped("chat")
        child.fold_into(metrics)  # folded: not carried again
        old.dropped("chat", 2)
        old.error("tap")
        for _ in range(3):
            old.written("responses", 100)
        child.handled("responses", 100)  # one handled; two were in the pipe when it died
        new.carry(old.unfolded())
        assert sorted(old.unfolded()) == [
            (("dropped", "chat"), 2),
            (("dropped", "responses"), 2),
            (("error", "tap"), 1),
        ]
        fresh = type(metrics)()
        SharedCounts(os.dup(new.fd)).fold_into(fresh)
        assert (flows(fresh, "chat", "dropped"), flows(fresh, "responses", "dropped")) == (2, 2)
        assert errors(fresh, "tap") == 1
    finally:
        for table in (old, child, new):
            table.close()


def test_the_budget_of_the_records_written_and_of_those_handled_is_read_back_exactly(metrics):
    proxy = SharedCounts()
    child = SharedCounts(os.dup(proxy.fd))
    try:
        proxy.written("chat", 4_000)
        proxy.written("not-an-api", 500)
        proxy.written("messages", 0)  # a record that held nothing (skipped)
        child.handled("chat", 4_000)
        child.fold_into(metrics)  # bytes are no flows: nothing counted from them
        assert (proxy.written_bytes(), proxy.handled_bytes()) == (4_500, 4_000)
        assert proxy.unhandled() == {"none": 1, "messages": 1}
        assert flows(metrics, "chat", "dropped") == 0
    finally:
        child.close()
        proxy.close()
