"""Names and labels checked at the door: queue names, and the resource labels a task
requires and a worker advertises (`gpu`, `mem:large`). Pure validation, shared by the
enqueue path, the worker settings, the features and the CLI."""

from __future__ import annotations

import re
from collections.abc import Iterable

_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}")


def check_queue_name(name: object, error: type[Exception]) -> None:
    """A queue name (and a tenant name): 1-128 letters, digits and _ . : / -."""
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
        raise error(
            f"bad queue name {name!r}: use 1-128 letters, digits and _ . : / - "
            "(starting with a letter or digit)"
        )


LABEL = re.compile(r"[a-z0-9][a-z0-9_.:-]{0,62}")
MAX_LABELS = 32


def check_labels(value: object, what: str, error: type[Exception]) -> tuple[str, ...]:
    """Validate a collection of labels into a sorted tuple without duplicates.

    Labels are compared exactly, so they are lower case only: `GPU` and `gpu` would
    otherwise be two resources that never match."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise error(
            f"{what} takes a set of labels, e.g. {what}={{'gpu'}}, not {type(value).__name__}"
        )
    labels: set[str] = set()
    for label in value:
        if not isinstance(label, str) or not LABEL.fullmatch(label):
            raise error(
                f"bad label {label!r} in {what}: use 1-63 lower-case letters, digits and "
                "_ . : - starting with a letter or digit (e.g. 'gpu', 'mem:large')"
            )
        labels.add(label)
    if len(labels) > MAX_LABELS:
        raise error(f"{what} has {len(labels)} labels; at most {MAX_LABELS} are allowed")
    return tuple(sorted(labels))


def satisfies(capabilities: Iterable[str], requires: Iterable[str]) -> bool:
    """Whether a worker with `capabilities` may run a job that `requires` these labels."""
    return set(requires) <= set(capabilities)
