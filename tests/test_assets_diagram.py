"""assets/figures/decoder_shapes.svg is current: regenerated from the model, byte for byte.

The SVG depends on the matplotlib release (its path data and layout), so the byte comparison
runs with the tested matplotlib of constraints.txt; the shapes are checked with any version.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import replace
from pathlib import Path

import pytest
from script_loader import load_script

from course_utils.lab import environment
from course_utils.lab.assets import asset_path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "draw_decoder_diagram.py"


draw = load_script(SCRIPT)
TESTED_MATPLOTLIB = environment.release(importlib.metadata.version("matplotlib")) == (
    environment.release(environment.tested_versions()["matplotlib"])
)


def test_every_stage_shows_the_running_examples_shape():
    stages = dict((name.strip(), shape) for name, shape in draw.traced_stages())
    assert stages["token ids"] == "(B=2, T=6)"
    assert stages["split into h heads"] == "(B=2, h=3, T=6, d_k=8)"
    assert stages["softmax(Q·Kᵀ/√d_k + causal mask)"] == "(B=2, h=3, T_q=6, T_k=6)"
    assert stages["LayerNorm, FFN up + GELU"] == "(B=2, T=6, d_ff=96)"
    # V: the distinct characters of the corpus, as notebooks 00 and 11 print it
    assert stages["LM head → logits"] == "(B=2, T=6, V=84)"
    sizes = {int(n) for shape in stages.values() for n in re.findall(r"=(\d+)", shape)}
    assert sizes == {2, 6, 3, 8, 24, 96, 84}


def test_the_shapes_come_from_the_model_not_from_the_labels(monkeypatch):
    """A model with another width gives other shapes: the traced-shape check fires."""
    real = draw.TinyDecoder
    monkeypatch.setattr(draw, "TinyDecoder", lambda config: real(replace(config, d_ff=48)))
    with pytest.raises(AssertionError, match="blocks.0.feed_forward.up"):
        draw.traced_stages()


@pytest.mark.tooling  # the asset tool: make test-tooling (CI)
def test_rendering_is_deterministic():
    first = draw.render_svg()
    assert first == draw.render_svg()
    assert "<dc:date>" not in first and "Matplotlib" not in first.split("<svg", 1)[1][:2000]


@pytest.mark.skipif(not TESTED_MATPLOTLIB, reason="SVG bytes depend on the matplotlib release")
def test_the_committed_svg_is_current():
    committed = asset_path("figures/decoder_shapes.svg").read_text(encoding="utf-8")
    assert draw.render_svg() == committed, "run `make assets` and commit the SVG"
    assert draw.main(["--check"]) == 0


@pytest.mark.tooling  # the asset tool: make test-tooling (CI)
def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "decoder_shapes.svg"
    stale.write_text("<svg/>")
    assert draw.main(["--check", "--output", str(stale)]) == 1
    assert "make assets" in capsys.readouterr().out
    assert (
        draw.main(["--output", str(stale)]) == 0
        and draw.main(["--check", "--output", str(stale)]) == 0
    )
