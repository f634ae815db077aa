"""The threads a trace runs on, by a calibration timed on the machine (`viz_model.search.thread_choice`): the
fastest count among those whose encoding and search logits equal the default's and whose maps are within 1e-6, kept
in a file; a trace searched on another thread count
equals the default one (the same output ids, maps within 1e-5), and a draft searching on its own threads verifies the
same output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import viz_model
from viz_model.nn.quantize import int8_search_network
from viz_model.search import thread_choice
from viz_model.search.decoding import beam_search
from viz_model.search.next_token import StepScorer

SHIPPED = viz_model.modeldir.shipped.ASSETS_DIR / viz_model.DEFAULT_MODEL
SENTENCES = ["A man in a blue shirt is standing on a ladder and cleaning the windows.",
             "Two dogs are playing in the snow.", "The children laugh while their father cooks dinner."]


class FakeMachine:
    """Work whose output and duration (on a fake clock) depend on the thread count it runs on."""

    def __init__(self, seconds: dict[int, float], values: dict[int, float], maps: dict[int, float] | None = None
                 ) -> None:
        self.seconds, self.values, self.maps, self.now = seconds, values, maps or {2: 0.5, 1: 0.5}, 0.0

    def clock(self) -> float:
        return self.now

    def work(self) -> tuple[torch.Tensor, torch.Tensor]:
        n = torch.get_num_threads()
        self.now += self.seconds[n]
        return torch.tensor([self.values[n]]), torch.tensor([self.maps[n]])


def calibrated(seconds: dict[int, float], values: dict[int, float], maps: dict[int, float] | None = None) -> dict:
    machine = FakeMachine(seconds, values, maps)
    return thread_choice.calibrate(machine.work, [2, 1], machine.clock)


def test_calibration_takes_the_fastest_count_with_the_same_logits():
    chosen = calibrated({2: 0.010, 1: 0.004}, {2: 1.0, 1: 1.0})
    assert chosen["threads"] == 1 and chosen["equal"] == ["2", "1"]
    assert chosen["median_ms"] == {"2": pytest.approx(10.0), "1": pytest.approx(4.0)}
    assert calibrated({2: 0.004, 1: 0.010}, {2: 1.0, 1: 1.0})["threads"] == 2


def test_calibration_never_takes_a_count_whose_logits_differ():
    chosen = calibrated({2: 0.010, 1: 0.001}, {2: 1.0, 1: 1.0 + 1e-7})
    assert chosen["threads"] == 2 and chosen["equal"] == ["2"]


def test_calibration_takes_recorded_maps_within_a_millionth_only():
    assert calibrated({2: 0.010, 1: 0.001}, {2: 1.0, 1: 1.0}, {2: 0.5, 1: 0.5 + 1e-8})["threads"] == 1
    assert calibrated({2: 0.010, 1: 0.001}, {2: 1.0, 1: 1.0}, {2: 0.5, 1: 0.5 + 1e-5})["threads"] == 2


def test_a_busy_machine_ends_the_calibration_early():
    machine = FakeMachine({2: 3.0, 1: 0.1}, {2: 1.0, 1: 1.0})
    chosen = thread_choice.calibrate(machine.work, [2, 1], machine.clock)
    assert chosen["threads"] == 1 and machine.now < 4 * (3.0 + 0.1)  # warm-up and one timed round, not seven


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_search_threads_is_calibrated_once_and_kept_for_the_process(tiny_model, monkeypatch, two_threads):
    monkeypatch.setattr(thread_choice, "_chosen", {})
    calls = []

    def calibrate(work, candidates, clock=None):
        calls.append(candidates)
        exact, maps = work()
        c = tiny_model.config
        encoding = thread_choice.SOURCE_TOKENS * c.d_model
        assert exact.shape == (encoding + thread_choice.STEPS * thread_choice.BEAM * c.vocab_size,)
        assert maps.numel() > (thread_choice.STEPS + 1) * c.vocab_size  # the recorded pass's logits, then its maps
        return {"threads": 1, "median_ms": {"2": 2.0, "1": 1.0}, "equal": ["2", "1"], "date": "today"}

    monkeypatch.setattr(thread_choice, "calibrate", calibrate)
    assert tiny_model.search_threads() == 1 and calls == [[2, 1]]
    key = thread_choice.calibration_key(tiny_model.search_network, tiny_model.network)
    assert key == (f"{thread_choice.network_key(tiny_model.search_network)}"
                   f"+{thread_choice.network_key(tiny_model.network)}@2")
    assert thread_choice.calibrations()[key]["threads"] == 1
    assert tiny_model.search_threads() == 1 and len(calls) == 1  # kept: not timed again in this process
    monkeypatch.setattr(thread_choice, "_chosen", {})  # a new process: nothing written down, timed afresh
    assert tiny_model.search_threads() == 1 and len(calls) == 2
    torch.set_num_threads(1)  # one thread by default: nothing to choose, nothing timed
    assert tiny_model.search_threads() == 1 and len(calls) == 2


def test_the_real_calibration_answers_from_what_it_timed(tiny_model, monkeypatch, two_threads):
    monkeypatch.setattr(thread_choice, "_chosen", {})
    chosen = tiny_model.search_threads()
    kept = thread_choice.calibrations()[thread_choice.calibration_key(tiny_model.search_network, tiny_model.network)]
    assert chosen == kept["threads"] and str(chosen) in kept["equal"] and "2" in kept["equal"]
    assert kept["median_ms"][str(chosen)] == min(kept["median_ms"][n] for n in kept["equal"])


@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_a_trace_searched_on_the_chosen_threads_equals_the_default(which, tiny_model, monkeypatch, two_threads):
    model = tiny_model if which == "tiny" else viz_model.load(SHIPPED, device="cpu")
    assert model.search_precision == "int8"
    traces = {}
    for count in (2, 1):
        monkeypatch.setattr(type(model), "search_threads", lambda self, n=count: n)
        traces[count] = [model.trace(s, beam=4) for s in (SENTENCES if which == "tiny" else SENTENCES[:1])]
    for default, chosen in zip(traces[2], traces[1], strict=True):
        assert chosen.output_ids == default.output_ids and chosen.translation == default.translation
        for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
            for a, b in zip(getattr(default, kind), getattr(chosen, kind), strict=True):
                np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_a_draft_on_its_own_threads_verifies_the_same_search(monkeypatch, two_threads):
    model = viz_model.load(SHIPPED, device="cpu", precision="fp32")
    draft = int8_search_network(model.network)
    seen = []
    scores = StepScorer.scores

    def counted(self, live=None):
        if self.model is draft:
            seen.append(torch.get_num_threads())
        return scores(self, live)

    monkeypatch.setattr(StepScorer, "scores", counted)
    for text in SENTENCES[:1]:
        src = torch.tensor([model.encode(text)])
        plain = beam_search(model.network, src, 4, 0.6)[0]
        for count in (2, 1):
            seen.clear()
            verified = beam_search(model.network, src, 4, 0.6, draft=draft, draft_threads=count)[0]
            assert verified.tokens == plain.tokens and verified.score == pytest.approx(plain.score, abs=1e-4)
            assert seen and set(seen) == {count}
    assert torch.get_num_threads() == 2
