"""Reading the sleep-state gauge and the sleep-op histogram from Prometheus text."""

from fixtures.observing import metrics

TEXT = """\
# HELP vllm:engine_sleep_state Engine sleep state
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} 1.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="discard_all"} 0.0
# HELP vllm:sleep_mode_operation_duration_seconds d
# TYPE vllm:sleep_mode_operation_duration_seconds histogram
vllm:sleep_mode_operation_duration_seconds_bucket{le="+Inf",operation="sleep"} 2.0
vllm:sleep_mode_operation_duration_seconds_count{operation="sleep"} 2.0
vllm:sleep_mode_operation_duration_seconds_sum{operation="sleep"} 0.2
# HELP vllm:sleep_mode_operations_in_flight f
# TYPE vllm:sleep_mode_operations_in_flight gauge
vllm:sleep_mode_operations_in_flight{operation="sleep"} 0.0
"""


def test_sleep_state_tuple():
    assert metrics.sleep_state(TEXT) == (0.0, 1.0, 0.0)
    assert metrics.sleep_state(TEXT, engine="1") is None


def test_sleep_op_counts_default_to_zero_when_absent():
    assert metrics.sleep_op_count(TEXT, "sleep") == 2.0
    assert metrics.sleep_op_count(TEXT, "wake") == 0.0
    assert metrics.sleep_ops_in_flight(TEXT, "sleep") == 0.0
    assert metrics.sleep_ops_in_flight(TEXT, "wake") is None
