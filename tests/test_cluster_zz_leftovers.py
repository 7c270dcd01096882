"""Runs after the rest of the suite (tests/conftest.py moves it last): nothing Faultline made is left.

A container, network, namespace, host link or ssh cluster record still present here means some test
(or a fault heal) leaked it.
"""

from __future__ import annotations

import pytest


@pytest.mark.docker
def test_no_faultline_container_or_network_left() -> None:
    from faultline.cluster.backends import leftovers

    left = leftovers(docker=True)
    assert not left.get("containers") and not left.get("networks"), left


@pytest.mark.root
def test_no_namespace_link_or_state_left() -> None:
    from faultline.cluster import state
    from faultline.cluster.local_backend import leftovers

    left = leftovers()
    assert not any(left.values()), left
    assert not state.names("ssh")
