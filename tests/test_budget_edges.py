"""The turn's read budget at its edges (guard/budget.py): a read that fills it exactly fits."""

from __future__ import annotations

from nodwyn_retrieval.guard import Budget


def test_a_read_that_fills_the_byte_budget_exactly_is_allowed_and_the_next_is_not() -> None:
    budget = Budget(bytes=10)
    assert budget.take(4) is None
    assert budget.take(6) is None
    assert budget.bytes_used == 10
    assert budget.take(1) == "the turn's read budget is spent: 10 of 10 bytes read, this read is 1"
    assert budget.take(0) is None  # an empty read still fits


def test_the_last_read_of_the_read_budget_is_allowed_and_the_next_is_not() -> None:
    budget = Budget(reads=2)
    assert budget.take(100) is None
    assert budget.take(100) is None
    assert budget.take(1) == "the turn's read budget is spent: 2 of 2 reads"
