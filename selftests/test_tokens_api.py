"""The token-in/token-out client (the spans over HTTP) and where its flag is launched, on stand-ins."""

from __future__ import annotations

import json

from fixtures.launching.environments import SCALE_OUT_ARGS, scale_out_args
from fixtures.observing import tokens_api


def test_scale_out_is_launched_from_the_release_that_has_it() -> None:
    assert scale_out_args("0.31.0") == ()
    assert scale_out_args("0.32.0") == SCALE_OUT_ARGS
    assert scale_out_args("0.32.0+cpu") == SCALE_OUT_ARGS
    assert scale_out_args("0.33.1") == SCALE_OUT_ARGS
    assert scale_out_args("not-a-version") == ()


class _Reply:
    def __init__(self, status: int, lines: list[str]) -> None:
        self.status_code, self.lines, self.text = status, lines, "refused"

    def __enter__(self) -> _Reply:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def iter_lines(self, decode_unicode: bool = False):
        yield from self.lines

    def json(self):
        return json.loads(self.lines[0])


def _chunk(tokens: list[int], finish: str | None = None, spans: object = None) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "token_ids": tokens, "finish_reason": finish,
                                               "weight_versions": spans}]})


def test_a_stream_accumulates_tokens_and_keeps_the_final_choices_spans(monkeypatch) -> None:
    spans = [{"version": "a", "start": 0, "end": 2}, {"version": "b", "start": 2, "end": 4}]
    lines = [_chunk([1, 2]), "", _chunk([3]), _chunk([4], "length", spans), "data: [DONE]"]
    sent = []

    def post(url, stream=False, timeout=None, json=None):
        sent.append((url, json))
        return _Reply(200, lines)

    monkeypatch.setattr(tokens_api.requests, "post", post)
    run = tokens_api.TokensClient("http://h:1", "m", 5.0).stream([7, 8], 4)
    assert run.done.wait(5)
    assert run.token_ids == [1, 2, 3, 4] and run.spans == [["a", 0, 2], ["b", 2, 4]] and run.error is None
    assert sent == [("http://h:1/inference/v1/generate", {
        "model": "m", "token_ids": [7, 8], "stream": True,
        "sampling_params": {"max_tokens": 4, "temperature": 0.0, "ignore_eos": True}})]


def test_a_refused_request_is_an_error_with_its_status(monkeypatch) -> None:
    monkeypatch.setattr(tokens_api.requests, "post", lambda *a, **k: _Reply(403, []))
    streamed = tokens_api.TokensClient("http://h:1", "m", 5.0).stream([7], 4)
    assert streamed.done.wait(5) and streamed.error == "403: refused" and streamed.final is None
    whole = tokens_api.TokensClient("http://h:1", "m", 5.0).generate([7], 4)
    assert whole.error == "403: refused" and "error='403: refused'" in whole.summary()


def test_spans_of_another_shape_are_passed_on_for_the_judge() -> None:
    run = tokens_api.TokensRun(final={"weight_versions": [{"version": "a", "first": 0}]})
    assert run.spans == [{"version": "a", "first": 0}]
    assert tokens_api.TokensRun(final={"weight_versions": None}).spans is None
