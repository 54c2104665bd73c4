"""The bill's payback line and its stored form."""

from __future__ import annotations

from speedopt.study._bill import Bill, Payback


def test_payback_says_after_how_many_epochs_or_that_nothing_pays_it_back():
    bill = Bill({"trials": 300.0, "finals": 70.0})
    assert Payback(bill.total_s, 41.0, 100, "an estimate").text() == (
        "this search took 6 min 10 s; at the projected saving of 41 s per epoch (an estimate), it pays for itself after 10 epochs of your 100"
    )
    assert "more than your 5" in Payback(bill.total_s, 41.0, 5, "x").text()
    assert "no saving was claimed" in Payback(bill.total_s, None, 100, "").text()
    assert Payback(bill.total_s, 41.0, 100, "x").after_epochs == 10 and Payback(bill.total_s, None, 100, "x").after_epochs is None
    assert Bill.from_attr({"trials": 1.5, "bad": "x", "neg": -1}) == Bill({"trials": 1.5})
