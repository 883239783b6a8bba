"""A module that no test may import: a job row names a task in it, and reading, cancelling
or enqueueing that task over HTTP must not import it (tests/web/test_doors.py)."""


def boom() -> None:
    raise AssertionError("imported and called")
