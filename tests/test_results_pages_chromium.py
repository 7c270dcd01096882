"""The pages a person reads after a failing run, in a real browser (headless Chromium): the report of an
invalid run, its interactive counterexample and the timeline of a 20,000-op run load without a console
error, the timeline draws the run's last op, and the counterexample highlights the op the checker named."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_results_serve import chromium  # the one way the tests drive Chromium

from faultline.checkers.linearizability import check, prefix_states
from faultline.results.publish import publish
from faultline.results.store import RunDir
from faultline.results.synth import synth_store

OPS = 20_000


@pytest.fixture(scope="module")
def invalid_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunDir, dict, list[dict]]]:
    root = tmp_path_factory.mktemp("pages") / "store"
    (path,) = synth_store(root, runs=1, ops=OPS, anomaly_rate=1.0, seed=3, jobs=1)
    run = RunDir(path)
    history = run.history()
    lin = check(history, "cas-register")
    assert lin["valid"] is False  # the synthetic run carries injected stale reads
    results = {"valid": False, "workload": lin}
    run.finish(results)
    publish(run)
    yield run, lin, history


def load(page: Path, tmp: Path, fragment: str = "") -> str:
    """The page's DOM after its scripts ran; fails on any console message or script error."""
    out = chromium(
        [
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,900",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        tmp,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    console = [line for line in out.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]
    assert console == []
    assert "data-js-errors" not in out.stdout
    return out.stdout


def chart(dom: str) -> dict[str, str]:
    """The data-* attributes the drawing script left on the chart."""
    tag = re.search(r'<div class="lanes" id="chart"([^>]*)>', dom)
    assert tag
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag.group(1)))


@pytest.mark.chromium
def test_report_of_an_invalid_run_says_what_went_wrong(invalid_run: tuple, tmp_path: Path) -> None:
    run, lin, _history = invalid_run
    dom = load(run.report_path, tmp_path)
    first_screen = dom.split("<h2>Test</h2>")[0]
    op = lin["failure"]["op"]
    assert "What was wrong" in first_screen and 'id="counterexample-link"' in first_screen
    assert f'a read on key "{lin["failure"]["key"]}" returned {op["value"]}' in first_screen.replace(
        "&quot;", '"'
    )
    assert "could only have held" in first_screen and "was written by process" in first_screen
    assert "<pre>" not in dom.split("<h2>Operations</h2>")[0]  # evidence as tables, never a JSON dump
    assert 'id="evidence-workload"' in dom and 'href="results.json"' in dom


@pytest.mark.chromium
def test_counterexample_highlights_the_op_the_checker_named(invalid_run: tuple, tmp_path: Path) -> None:
    run, lin, history = invalid_run
    dom = load(run.counterexample_path, tmp_path)
    attrs = chart(dom)
    failure = lin["failure"]
    assert int(attrs["highlighted"]) == failure["op"]["invoke_index"]
    assert int(attrs["step"]) == len(failure["linearized"])  # opens on the last linearized op
    key_ops = sum(1 for op in history if op.get("key") == failure["key"] and op["type"] == "invoke")
    assert int(attrs["drawn"]) < key_ops  # the first view is the neighbourhood of the failure ...
    whole = chart(load(run.counterexample_path, tmp_path, "#t=-1,1000&step=3"))
    assert int(whole["drawn"]) == key_ops  # ... but the whole key is there
    assert whole["step"] == "3"  # stepping shows the model's state after the third linearized op
    states = prefix_states(lin)
    assert states is not None and len(states) == len(failure["linearized"])
    assert json.loads(whole["state"].replace("&quot;", '"')) == json.loads(json.dumps(states[2]))


# Drives the chart as a person would (hover the highlighted op, step, zoom out, wheel in, arrow key) and
# writes what the page showed into <body data-probe>.
PROBE = """<script>
window.addEventListener("load", () => {
  const root = document.getElementById("chart"), canvas = root.querySelector("canvas"), out = {};
  const click = (d) => root.querySelector("button[data-do='" + d + "']").click();
  const [x, y] = root._locate(Number(root.dataset.highlighted));
  canvas.dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y, bubbles: true}));
  out.tip = root.querySelector(".tip").textContent;
  click("first"); out.first = root.dataset.step;
  click("next"); click("next"); out.next = [root.dataset.step, root.dataset.state];
  window.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowLeft"})); out.key = root.dataset.step;
  click("whole"); out.whole = Number(root.dataset.drawn);
  const r = canvas.getBoundingClientRect();
  canvas.dispatchEvent(new WheelEvent("wheel", {clientX: r.left + r.width / 2, clientY: r.top + 40, deltaY: -100,
                                                bubbles: true, cancelable: true}));
  out.wheel = Number(root.dataset.drawn);
  document.body.dataset.probe = JSON.stringify(out);
});
</script>"""


@pytest.mark.chromium
def test_counterexample_hover_step_and_zoom(invalid_run: tuple, tmp_path: Path) -> None:
    run, lin, history = invalid_run
    probed = tmp_path / "probed.html"
    probed.write_text(run.counterexample_path.read_text().replace("</body>", PROBE + "</body>"))
    dom = load(probed, tmp_path)
    got = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', dom).group(1)))
    op = lin["failure"]["op"]
    assert got["tip"].startswith(f"process {op['process']}: read {lin['failure']['key']} {op['value']} → ok")
    assert got["tip"].endswith("cannot be linearized here") and f"(index {op['invoke_index']})" in got["tip"]
    states = prefix_states(lin)
    assert got["first"] == "0" and got["next"] == ["2", json.dumps(states[1])] and got["key"] == "1"
    key_ops = sum(1 for o in history if o.get("key") == lin["failure"]["key"] and o["type"] == "invoke")
    assert got["whole"] == key_ops and 0 < got["wheel"] < key_ops


@pytest.mark.chromium
def test_timeline_draws_every_op_to_the_last(invalid_run: tuple, tmp_path: Path) -> None:
    run, _lin, history = invalid_run
    dom = load(run.timeline_path, tmp_path)
    attrs = chart(dom)
    client_invokes = sum(1 for op in history if op["type"] == "invoke" and op["process"] != "nemesis")
    assert client_invokes == OPS and int(attrs["drawn"]) == OPS
    last_client = max(op["index"] for op in history if op["process"] != "nemesis")
    assert int(attrs["last-drawn"]) == last_client
    t_end = history[-1]["time"] / 1e9
    zoomed = chart(load(run.timeline_path, tmp_path, f"#t={t_end - 2},{t_end}"))
    assert 0 < int(zoomed["drawn"]) < OPS / 10 and int(zoomed["last-drawn"]) == last_client
