"""The fault plugin without vLLM: registry consistency, the fit check, arming all-or-nothing."""

from __future__ import annotations

import sys
import types
from dataclasses import replace

import pytest

from fixtures.spec.catalog import load_catalog
from vllm_lifecycle.faults import patches, plugin
from vllm_lifecycle.faults.registry import ENV_VAR, FAULTS, Fault, Patch, UnknownFaultError, get_fault


def test_every_fault_names_catalogued_behaviours_and_real_replacements():
    catalog = load_catalog()
    for fault in FAULTS.values():
        assert fault.kind == "preview" or fault.breaks, f"{fault.name} breaks nothing"
        for bid in fault.breaks + fault.guards:
            assert bid in catalog, f"{fault.name}: {bid} is not in the catalog"
        assert not set(fault.breaks) & set(fault.guards), f"{fault.name}: a guard it breaks"
        for patch in fault.patches:
            assert callable(getattr(patches, patch.replacement)), patch.replacement
            assert ":" in patch.target and len(patch.source_sha256) == 16


def test_each_initial_fault_of_the_issue_exists():
    expected = {"partial-wake-resumes", "keep-aborts", "wait-skips-drain", "sleep-flag-stale",
                "gauge-not-updated", "late-arrival-dropped", "wake-perturbs-weights",
                "rss-leak-per-cycle", "double-sleep-500"}
    assert expected <= set(FAULTS)
    assert FAULTS["layered"].kind == "preview" and FAULTS["layered"].profile == "layered"


def test_unknown_fault_is_named():
    with pytest.raises(UnknownFaultError, match="unknown lifecycle fault 'nope'; known: "):
        get_fault("nope")


@pytest.fixture
def fake_vllm(monkeypatch):
    """A module shaped like a vLLM one, with a method whose source the fault pins."""
    module = types.ModuleType("fake_vllm_engine")

    class Engine:
        def wake_up(self, tags=None):
            return True

    Engine.__module__ = module.__name__
    module.Engine = Engine
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def _fault(digest: str, target: str = "fake_vllm_engine:Engine.wake_up") -> Fault:
    return Fault("t", "fault", "test", "none", breaks=("flags/partial-wake",),
                 patches=(Patch(target, digest, "wake_up_resumes_on_weights"),))


def test_a_patch_that_fits_is_applied(fake_vllm, monkeypatch):
    original = fake_vllm.Engine.__dict__["wake_up"]
    monkeypatch.setattr(fake_vllm.Engine, "wake_up", original)
    plugin.arm(_fault(plugin.source_digest(original)))
    assert fake_vllm.Engine.wake_up is not original
    assert fake_vllm.Engine.wake_up.__lifecycle_fault__ == "t"


def test_a_changed_function_refuses_loudly_and_patches_nothing(fake_vllm):
    original = fake_vllm.Engine.__dict__["wake_up"]
    with pytest.raises(plugin.FaultDoesNotFitError, match="changed: source sha256"):
        plugin.arm(_fault("0" * 16))
    assert fake_vllm.Engine.__dict__["wake_up"] is original


def test_a_missing_target_refuses_loudly(fake_vllm):
    with pytest.raises(plugin.FaultDoesNotFitError, match="not found"):
        plugin.arm(_fault("0" * 16, target="fake_vllm_engine:Engine.gone"))


def test_register_is_inert_without_the_variable(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    plugin.register()  # no vLLM here: any import attempt would fail


def test_register_refuses_an_unknown_name(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "no-such-fault")
    with pytest.raises(UnknownFaultError):
        plugin.register()


def test_the_plugin_is_declared_as_a_vllm_general_plugin():
    text = (plugin.__file__.rsplit("/vllm_lifecycle/", 1)[0] + "/pyproject.toml")
    with open(text) as handle:
        pyproject = handle.read()
    assert '[project.entry-points."vllm.general_plugins"]' in pyproject
    assert 'lifecycle_faults = "vllm_lifecycle.faults.plugin:register"' in pyproject


def test_register_arms_each_fault_a_comma_separated_list_names(fake_vllm, monkeypatch, capsys):
    class Metrics:
        def record(self, operation):
            return operation

    Metrics.__module__ = fake_vllm.__name__
    fake_vllm.Metrics = Metrics
    wake = fake_vllm.Engine.__dict__["wake_up"]
    monkeypatch.setattr(fake_vllm.Engine, "wake_up", wake)
    one = _fault(plugin.source_digest(wake))
    two = Fault("u", "fault", "test", "none", breaks=("weights/operation-metrics",),
                patches=(Patch("fake_vllm_engine:Metrics.record",
                               plugin.source_digest(Metrics.__dict__["record"]),
                               "record_counts_updates_twice"),))
    monkeypatch.setitem(FAULTS, "t", one)
    monkeypatch.setitem(FAULTS, "u", two)
    monkeypatch.setenv(ENV_VAR, "t, u")
    plugin.register()
    assert fake_vllm.Engine.wake_up.__lifecycle_fault__ == "t"
    assert fake_vllm.Metrics.record.__lifecycle_fault__ == "u"
    assert capsys.readouterr().err.count("vllm-lifecycle-faults: armed fault") == 2


def test_two_faults_on_one_function_are_refused_before_anything_is_patched(fake_vllm, monkeypatch):
    wake = fake_vllm.Engine.__dict__["wake_up"]
    monkeypatch.setitem(FAULTS, "t", _fault(plugin.source_digest(wake)))
    monkeypatch.setitem(FAULTS, "t2", replace(FAULTS["t"], name="t2"))
    monkeypatch.setenv(ENV_VAR, "t,t2")
    with pytest.raises(ValueError, match=r"faults 't' and 't2' both patch fake_vllm_engine:Engine\.wake_up"):
        plugin.register()
    assert fake_vllm.Engine.__dict__["wake_up"] is wake


def test_the_weight_bookkeeping_replacements_do_what_their_faults_say():
    import asyncio
    from contextlib import contextmanager

    class Client:
        def __init__(self, refusal: str) -> None:
            self.refusal, self.committed, self.sums = refusal, None, [{"k": "a"}]

        async def collective_rpc(self, method):
            raise RuntimeError(self.refusal)

        async def update_weight_version(self, version):
            self.committed = version

        async def compute_weight_checksums(self):
            return self.sums

        async def get_weight_version(self):
            return self.committed

    async def finish(self, weight_version=None):
        raise AssertionError("replaced")

    stray = Client("finish_weight_update called without a matching start_weight_update.")
    asyncio.run(patches.finish_commits_without_session(finish)(stray, "v-stray"))
    assert stray.committed == "v-stray"  # accepted and committed
    with pytest.raises(RuntimeError, match="engine dead"):  # any other error still raises
        asyncio.run(patches.finish_commits_without_session(finish)(Client("engine dead"), "v"))

    front = Client("")
    get = patches.weight_version_from_frontend_record(Client.get_weight_version)
    assert asyncio.run(get(front)) == "default"
    asyncio.run(patches.records_committed_version(Client.update_weight_version)(front, "v2"))
    assert asyncio.run(get(front)) == "v2" and asyncio.run(get(Client(""))) == "default"

    blind = Client("")
    checksums = patches.checksums_from_first_answer(Client.compute_weight_checksums)
    first = asyncio.run(checksums(blind))
    blind.sums = [{"k": "b"}]
    assert asyncio.run(checksums(blind)) == first == [{"k": "a"}]

    observed: list[str] = []

    class Metrics:
        class duration:  # noqa: N801 - the histogram's shape: .labels(op).observe(s)
            @staticmethod
            def labels(op):
                return types.SimpleNamespace(observe=lambda s: observed.append(op))

        @contextmanager
        def record(self, operation):
            yield
            observed.append(operation)

    record = patches.record_counts_updates_twice(Metrics.__dict__["record"])
    for op in ("start", "update", "finish"):
        with record(Metrics(), op):
            pass
    assert observed == ["start", "update", "update", "finish"]

    state = types.SimpleNamespace(weight_version_starts=[])
    track = patches.track_keeps_first_version(
        lambda self, v: self.weight_version_starts.append((v, len(self.weight_version_starts))))
    track(state, "old")
    track(state, "new")
    assert state.weight_version_starts == [("old", 0)]
