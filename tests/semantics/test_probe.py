import json

import numpy as np
import pytest

pytest.importorskip("transformers")
from PIL import Image

from gymcurric.cli import main
from gymcurric.semantics.probe import centroid, separation_report
from tests.semantics.tiny_models import build_tiny_clip, build_tiny_siglip

SAFE = ["a clear path to the goal", "open floor"]
UNSAFE = ["a robot inside a red hazard"]


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("clip") / "model")


@pytest.fixture(scope="module")
def frames_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("frames")
    rng = np.random.default_rng(0)
    for i in range(5):
        frame = rng.integers(0, 255, (48, 40, 3), dtype=np.uint8)
        Image.fromarray(frame).save(folder / f"frame_{i:02d}.png")
    (folder / "notes.txt").write_text("not a frame")
    return folder


def probe(capsys, *args):
    code = main(["probe", *map(str, args)])
    out = capsys.readouterr().out
    return code, out


def test_probe_json_and_annotated_frames(tiny_clip, frames_dir, tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, out = probe(
        capsys,
        "--model",
        tiny_clip,
        "--frames",
        frames_dir,
        "--safe",
        *SAFE,
        "--unsafe",
        *UNSAFE,
        "--out",
        out_dir,
    )
    assert code == 0
    report = json.loads(out)
    assert report == json.loads((out_dir / "report.json").read_text())
    assert report["status"].startswith("ok")
    assert report["safe"] == SAFE and report["unsafe"] == UNSAFE
    prompts = report["prompts"]
    assert prompts["n_safe"] == 2 and prompts["unsafe_intra_similarity"] is None
    assert -1.0 <= prompts["safe_intra_similarity"] <= 1.0
    assert np.cos(np.radians(prompts["centroid_angle_deg"])) == pytest.approx(
        prompts["centroid_cosine"], abs=1e-9
    )
    rows = report["per_frame"]
    assert [r["file"] for r in rows] == [f"frame_{i:02d}.png" for i in range(5)]
    margins = np.array([r["margin"] for r in rows])
    for r in rows:
        assert r["margin"] == pytest.approx(r["sim_safe"] - r["sim_unsafe"])
    stats = report["frames"]["margin"]
    assert report["frames"]["n"] == 5
    assert stats["mean"] == pytest.approx(margins.mean())
    assert stats["min"] == pytest.approx(margins.min()) and stats["p50"] == pytest.approx(
        np.median(margins)
    )
    assert stats["frac_positive"] == pytest.approx((margins > 0).mean())
    for r in rows:
        with Image.open(out_dir / r["annotated"]) as im:
            assert im.mode == "RGB" and im.width >= 256 and im.height > im.width * 48 / 40
            pixels = np.asarray(im)
        strip = pixels[-44:]
        assert (strip != 255).any()  # text and a margin bar were drawn


def test_margin_sign_flips_when_prompt_sets_are_swapped(tiny_clip, frames_dir, capsys):
    _, a = probe(
        capsys, "--model", tiny_clip, "--frames", frames_dir, "--safe", *SAFE, "--unsafe", *UNSAFE
    )
    _, b = probe(
        capsys, "--model", tiny_clip, "--frames", frames_dir, "--safe", *UNSAFE, "--unsafe", *SAFE
    )
    ma = np.array([r["margin"] for r in json.loads(a)["per_frame"]])
    mb = np.array([r["margin"] for r in json.loads(b)["per_frame"]])
    assert np.abs(ma).min() > 0
    np.testing.assert_allclose(mb, -ma, atol=1e-6)
    assert json.loads(a)["prompts"]["centroid_angle_deg"] == pytest.approx(
        json.loads(b)["prompts"]["centroid_angle_deg"]
    )


def test_probe_with_siglip(tmp_path, frames_dir, capsys):
    path = build_tiny_siglip(tmp_path / "siglip")
    code, out = probe(
        capsys,
        "--model",
        path,
        "--kind",
        "siglip",
        "--frames",
        frames_dir,
        "--safe",
        "safe",
        "--unsafe",
        "unsafe",
    )
    assert code == 0 and json.loads(out)["frames"]["n"] == 5


def test_bad_inputs_exit_2_with_a_message(tiny_clip, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        main(
            ["probe", "--model", tiny_clip, "--frames", str(empty), "--safe", "a", "--unsafe", "b"]
        )
        == 2
    )
    assert "--frames" in capsys.readouterr().err
    assert (
        main(
            [
                "probe",
                "--model",
                str(tmp_path / "nowhere"),
                "--frames",
                str(empty),
                "--safe",
                "a",
                "--unsafe",
                "b",
            ]
        )
        == 2
    )
    (empty / "x.png").write_bytes(b"")
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(empty / "x.png")
    assert (
        main(
            [
                "probe",
                "--model",
                str(tmp_path / "nowhere"),
                "--frames",
                str(empty),
                "--safe",
                "a",
                "--unsafe",
                "b",
            ]
        )
        == 2
    )
    assert "--model" in capsys.readouterr().err


def test_separation_report_by_hand():
    e1, e2 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    mix = [np.sqrt(0.5), np.sqrt(0.5), 0.0]
    r = separation_report([e1, e2, mix], [e1, [1.0, 0.1, 0.0]], [e2])
    assert r["prompts"]["inter_similarity"] == pytest.approx((0 + 0.1 / np.sqrt(1.01)) / 2)
    assert r["prompts"]["safe_intra_similarity"] == pytest.approx(1 / np.sqrt(1.01))
    mu = centroid([e1, [1.0, 0.1, 0.0]])
    assert np.linalg.norm(mu) == pytest.approx(1.0)
    margins = [f["margin"] for f in r["per_frame"]]
    assert margins[0] == pytest.approx(mu[0]) and margins[1] == pytest.approx(mu[1] - 1)
    assert r["frames"]["margin"]["frac_positive"] == pytest.approx(2 / 3)


def test_probe_help_from_the_command_line():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "gymcurric", "probe", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for option in ("--model", "--frames", "--safe", "--unsafe", "--out", "--kind"):
        assert option in out.stdout


@pytest.mark.slow
def test_probe_as_a_subprocess(tiny_clip, frames_dir, tmp_path):
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gymcurric",
            "probe",
            "--model",
            tiny_clip,
            "--frames",
            str(frames_dir),
            "--safe",
            "safe",
            "--unsafe",
            "unsafe",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == json.loads((tmp_path / "report.json").read_text())
    assert len(list(tmp_path.glob("*_probe.png"))) == 5
