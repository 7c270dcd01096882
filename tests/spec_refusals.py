"""The refusals of a test's options that happen before anything starts (controller/testspec.py)."""

from __future__ import annotations

from typing import Any

import pytest

from faultline.controller import testspec
from faultline.controller.errors import UsageError


def assert_refused(match: str, **options: Any) -> None:
    """Building the test of `options` fails with a usage error whose message matches `match`."""
    with pytest.raises(UsageError, match=match):
        testspec.build_test(options)
