"""The review page on an imported LeRobotDataset v3 (`spabench import lerobot`): an episode that is not
the first in its cameras' shared MP4s plays from its own offset, stays inside its span, shows its own
pictures, and is scored (also blind) from the page as a native attempt is."""

from __future__ import annotations

import pytest

from spabench.ledger import Ledger
from spabench.record.lerobot_import import import_lerobot
from tests.support.lerobot_datasets import level, make_dataset

from .conftest import assert_blind, policy_words, review_server

pytestmark = [pytest.mark.bench, pytest.mark.slow]

FPS, LENGTHS = 10, (12, 15, 10)      # episode 1 lies at 1.2 .. 2.7 s of each camera's file
START, END = 1.2, 2.7
READY = "() => { const v = Array.from(document.querySelectorAll('#videos video')); " \
        "return v.length === 2 && v.every(x => x.readyState >= 2 && !x.seeking); }"
TIMES = "() => Array.from(document.querySelectorAll('#videos video')).map(v => v.currentTime)"
# the mean grey level of what each video element shows now (drawn onto a canvas)
GREY = """() => Array.from(document.querySelectorAll('#videos video')).map(v => {
  const c = document.createElement('canvas'); c.width = v.videoWidth; c.height = v.videoHeight;
  const g = c.getContext('2d'); g.drawImage(v, 0, 0); const d = g.getImageData(0, 0, c.width, c.height).data;
  let s = 0; for (let i = 0; i < d.length; i += 4) s += d[i]; return s / (d.length / 4); })"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("imported")
    dataset = make_dataset(tmp / "dataset", cameras=("front", "wrist"), lengths=LENGTHS, fps=FPS)
    campaign = tmp / "campaign"
    import_lerobot(dataset, campaign)
    with Ledger.open(campaign, readonly=True) as ledger:
        attempts = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
    with review_server(campaign) as url:
        yield url, campaign, attempts


def _scrub(page, t: float) -> None:
    page.evaluate(f"() => {{ const s = document.querySelector('#scrubber'); s.value = {t}; "
                  "s.dispatchEvent(new Event('input')); }")
    page.wait_for_function(READY)


def test_an_episode_inside_a_shared_mp4_plays_from_its_own_offset(imported, page):
    url, campaign, attempts = imported
    page.goto(f"{url}/review/{attempts[1].attempt_id}")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function(f"() => ({TIMES})().every(t => Math.abs(t - {START}) < 1e-3)", timeout=30_000)
    assert page.evaluate("() => Array.from(document.querySelectorAll('#videos video')).map(v => v.dataset.offset)") \
        == [str(START)] * 2
    assert page.evaluate("() => Number(document.querySelector('#scrubber').max)") == pytest.approx(END - START)
    # what is on screen is episode 1's first frame, not episode 0's (the file's start)
    assert page.evaluate(GREY) == pytest.approx([level(1, 0)] * 2, abs=8)
    # the scrubber is the episode's own time: 0.7 s in is 1.9 s into the file, frame 7 of episode 1
    _scrub(page, 0.7)
    assert page.evaluate(TIMES) == pytest.approx([START + 0.7] * 2, abs=1e-3)
    assert page.evaluate(GREY) == pytest.approx([level(1, 7)] * 2, abs=8)
    # played to its end, it stops inside its span (never into episode 2) and the scrubber says the end
    page.click("#play")
    page.wait_for_function("() => document.querySelector('#play').textContent === 'Play'", timeout=30_000)
    page.wait_for_function(READY)
    times = page.evaluate(TIMES)
    assert all(START <= t <= END + 1e-3 for t in times), times
    assert float(page.input_value("#scrubber")) == pytest.approx(END - START, abs=2 / FPS)
    assert page.evaluate(GREY) == pytest.approx([level(1, LENGTHS[1] - 1)] * 2, abs=8)
    # the joints are on the timeline (the dataset has the SO-101 state), the instruction is the task text
    assert "stack the blocks" in page.text_content("#instruction")
    assert page.evaluate("() => data.episode.state.length") == LENGTHS[1]


def test_imported_attempts_are_scored_from_the_page_and_blind(imported, page):
    url, campaign, attempts = imported
    attempt = attempts[2].attempt_id
    page.goto(f"{url}/review/{attempt}?rater=Carol%20Jones")
    page.wait_for_function(READY, timeout=30_000)
    page.check("input[name=success][value=no]")
    page.check("input[name=failure_mode][value=grasp_failure]")
    page.click("#save")
    page.wait_for_function("() => /saved/.test(document.querySelector('#saved').textContent)")
    page.goto(f"{url}/review/{attempt}?rater=Dan%20Smith&blind=1")
    page.wait_for_function(READY, timeout=30_000)
    assert "Carol" not in page.text_content("body")
    assert_blind(page, policy_words(campaign), "imported attempt, blind")
    page.check("input[name=success][value=yes]")
    page.click("#save")
    page.wait_for_function("() => /saved/.test(document.querySelector('#saved').textContent)")
    with Ledger.open(campaign, readonly=True) as ledger:
        scores = {s.rater: (s.success, s.failure_mode) for s in ledger.scores_for(attempt)}
    assert scores == {"Carol Jones": (False, "grasp_failure"), "Dan Smith": (True, None)}


@pytest.fixture(scope="module")
def five_without_state(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("imported5")
    dataset = make_dataset(tmp / "dataset", cameras=("front", "wrist", "left", "right", "top"), lengths=LENGTHS,
                           fps=FPS, state=False)
    campaign = tmp / "campaign"
    import_lerobot(dataset, campaign)
    with Ledger.open(campaign, readonly=True) as ledger:
        attempts = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
    with review_server(campaign) as url:
        yield url, attempts


def test_five_cameras_without_state_play_in_sync_from_the_last_offset(five_without_state, page):
    url, attempts = five_without_state
    start = sum(LENGTHS[:2]) / FPS                       # episode 2: the file's last 1.0 s
    ready = READY.replace("v.length === 2", "v.length === 5")
    page.goto(f"{url}/review/{attempts[2].attempt_id}")
    page.wait_for_function(ready, timeout=30_000)
    page.wait_for_function(f"() => ({TIMES})().every(t => Math.abs(t - {start}) < 1e-3)", timeout=30_000)
    assert page.evaluate(GREY) == pytest.approx([level(2, 0)] * 5, abs=8)
    page.evaluate("() => { const s = document.querySelector('#scrubber'); s.value = 0.5; "
                  "s.dispatchEvent(new Event('input')); }")
    page.wait_for_function(ready)
    assert page.evaluate(TIMES) == pytest.approx([start + 0.5] * 5, abs=1e-3)
    assert page.evaluate(GREY) == pytest.approx([level(2, 5)] * 5, abs=8)
    # no state in the dataset: the timeline has no joint values (null), the page draws without error
    assert page.evaluate("() => data.episode.state.every(r => r.every(v => v === null))")
