"""Release profiles: which contract a target's release is held to, and the oldest release the
suite supports."""

from __future__ import annotations

import pytest

from fixtures.errors import ConfigError
from fixtures.spec.releases import profile_ranges, resolve_profile


@pytest.mark.parametrize(("version", "profile"),
                         [("0.32.0", "0.32"), ("0.32.1+cpu", "0.32"), ("0.33.0", "0.33"),
                          ("0.34.0rc1", "0.33"), ("1.0.0", "0.33"),
                          # development builds: the newest profile at or below their release line
                          ("0.34.0.dev12+g1a2b3c.cpu", "0.33"), ("0.33.1rc1", "0.33"),
                          ("0.32.0+cpu", "0.32"), ("0.32.1.dev3+gdeadbee", "0.32"),
                          # PEP 440 puts these below 0.33.0; they are the 0.33 line, held to 0.33
                          ("0.33.0.dev5", "0.33"), ("0.33.0rc1", "0.33"), ("0.33.0.post1", "0.33")])
def test_profile_follows_the_target_release(version, profile):
    assert resolve_profile("auto", version) == profile


def test_explicit_profile_wins_and_unparsable_version_is_an_error():
    assert resolve_profile("layered", "0.32.0") == "layered"
    with pytest.raises(ConfigError, match="set --lifecycle-profile"):
        resolve_profile("auto", "main-dev")


@pytest.mark.parametrize(("version", "profile"), [("0.31.2", "0.32"), ("0.31.0.dev9+gabc.cpu", "0.32"),
                                                ("0.27.0", "0.32"), ("0.27.0.dev1", "0.32")])
def test_supported_releases_before_the_oldest_profile_take_it(version, profile):
    assert resolve_profile("auto", version) == profile


@pytest.mark.parametrize("version", ["0.26.0", "0.8.5"])
def test_a_release_older_than_the_oldest_supported_is_one_line_whatever_the_profile(version):
    for requested in ("auto", "0.32"):
        with pytest.raises(ConfigError) as err:
            resolve_profile(requested, version)
        assert str(err.value) == (f"vLLM {version} is older than the oldest release the suite "
                                  f"supports (0.27.0; see README 'Releases')")


def test_profile_ranges_are_stated():
    assert profile_ranges() == {"0.32": ">=0.27.0,<0.33.0", "0.33": ">=0.33.0"}


def test_the_release_sweep_starts_at_the_oldest_supported_release_and_the_config_shares_the_rule():
    from sweep import matrix, releases

    spread = releases.DEFAULT_RELEASES
    assert spread[0] == "0.27.0" and resolve_profile("auto", spread[0]) == "0.32"
    assert list(spread) == sorted(set(spread), key=matrix.version_key)
