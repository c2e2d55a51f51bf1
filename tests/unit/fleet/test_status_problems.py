"""`riak-events status` problem lines (fleet/status.problems): one line each."""

from __future__ import annotations

from fleet.status import problems


def test_a_problem_is_one_line_even_when_its_error_has_several() -> None:
    # A plugin disabled for failing: its reason ends with the plugin's traceback line, and
    # a failed load's reason may hold several; grep and alerting read one line each.
    report = {
        "nodes": [],
        "relocators": [],
        "companions": [
            {
                "url": "http://c1:5000",
                "up": True,
                "substreams": {
                    "broken": {
                        "state": "disabled",
                        "disabled": {
                            "reason": "5 failures in a row, last: ZeroDivisionError"
                            "\n  at broken.py:5"
                        },
                    }
                },
                "load_failed": [{"origin": "bad.py", "reason": "SyntaxError\n  line 3"}],
            }
        ],
    }
    found = problems(report)
    assert found == [
        "companion http://c1:5000: substream broken disabled (5 failures in a row, last: "
        "ZeroDivisionError / at broken.py:5)",
        "companion http://c1:5000: plugin bad.py failed to load: SyntaxError / line 3",
    ]
