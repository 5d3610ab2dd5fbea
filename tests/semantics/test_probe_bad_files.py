"""``gymcurric probe`` with a frame that does not decode, or an ``--out`` it cannot write.

Each used to end in a raw traceback (exit code 1): ``PIL.UnidentifiedImageError`` for a file
that is no image, ``OSError: image file is truncated`` for a cut-off PNG, and
``NotADirectoryError`` / ``IsADirectoryError`` from ``--out``. Now each is one line naming the
option and the file, exit code 2; when writing fails after the model ran, the report is still
printed on stdout and nothing already in ``--out`` is removed.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("transformers")
from PIL import Image

from gymcurric.cli import main
from tests.semantics.tiny_models import cached_tiny


def _frames(folder, n=3):
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        frame = rng.integers(0, 255, (24, 20, 3), dtype=np.uint8)
        Image.fromarray(frame).save(folder / f"f{i}.png")
    return folder


def probe(model, frames, *more):
    argv = ["probe", "--model", str(model), "--frames", str(frames), "--safe", "a clear path"]
    return main([*argv, "--unsafe", "a hazard", *map(str, more)])


def _one_line_error(err, *parts):
    # transformers may draw progress bars on stderr before it: the error is its last line
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("gymcurric probe: error: "), err
    assert err.count("gymcurric probe") == 1 and "Traceback" not in err
    for part in parts:
        assert part in lines[-1], (part, lines[-1])


@pytest.mark.parametrize("damage", ["not_an_image", "truncated", "empty"])
def test_a_frame_that_does_not_decode_names_the_file(tmp_path, capsys, damage):
    frames = _frames(tmp_path / "frames")
    bad = frames / "f1.png"
    data = bad.read_bytes()
    bad.write_bytes({"not_an_image": b"no png here", "truncated": data[: len(data) // 2],
                     "empty": b""}[damage])  # fmt: skip
    assert probe(cached_tiny("clip"), frames) == 2
    out, err = capsys.readouterr()
    _one_line_error(err, "--frames", str(bad), "cannot read the frame")
    assert out == ""
    if damage == "truncated":
        assert "truncated" in err


def test_an_out_under_a_file_or_a_file_is_refused_before_the_model_loads(tmp_path, capsys):
    frames = _frames(tmp_path / "frames")
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    # /nonexistent would be refused too, after --out: the --out check comes before the model
    assert probe("/nonexistent", frames, "--out", a_file / "sub") == 2
    _one_line_error(capsys.readouterr().err, "'--out'", f"{a_file} is a file")
    assert probe("/nonexistent", frames, "--out", a_file) == 2
    _one_line_error(capsys.readouterr().err, "'--out'", f"'{a_file}' (is a file")
    assert a_file.read_text() == "kept"


def test_a_read_only_out_is_refused(tmp_path, capsys, monkeypatch):
    frames = _frames(tmp_path / "frames")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    if os.access(read_only, os.W_OK):  # root writes anywhere: pretend it cannot
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m: real(p, m) and p != read_only)
    try:
        assert probe("/nonexistent", frames, "--out", read_only / "probe") == 2
    finally:
        read_only.chmod(0o755)
    _one_line_error(capsys.readouterr().err, "'--out'", f"{read_only} is not writable")
    assert not (read_only / "probe").exists()


def test_a_failed_write_keeps_the_report_and_what_was_written(tmp_path, capsys):
    frames = _frames(tmp_path / "frames")
    out_dir = tmp_path / "out"
    (out_dir / "report.json").mkdir(parents=True)  # the report cannot be written there
    (out_dir / "earlier.txt").write_text("kept")
    assert probe(cached_tiny("clip"), frames, "--out", out_dir) == 2
    out, err = capsys.readouterr()
    _one_line_error(err, "'--out'", "report.json", "3 of 3 annotated frames", "on stdout")
    report = json.loads(out)
    assert report["frames"]["n"] == 3 and "out" not in report
    assert [r["annotated"] for r in report["per_frame"]] == [f"f{i}_probe.png" for i in range(3)]
    for i in range(3):
        with Image.open(out_dir / f"f{i}_probe.png") as im:
            assert im.width >= 256
    assert (out_dir / "earlier.txt").read_text() == "kept"


def _uniform_frames(folder, n):
    folder.mkdir()
    for i in range(n):  # flat frames: small PNGs, so a long report.json outgrows them
        Image.fromarray(np.full((24, 20, 3), 7 * i % 255, np.uint8)).save(folder / f"f{i:02d}.png")
    return folder


def _probe_with_file_size_limit(model, frames, out, limit):
    """``python -m gymcurric probe ... --out OUT`` whose files may not grow past ``limit``.

    A write past the limit fails with EFBIG after the file was opened (as a full disk fails),
    leaving the bytes written up to the limit.
    """
    import resource
    import signal
    import subprocess
    import sys

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    argv = ["probe", "--model", str(model), "--frames", str(frames), "--out", str(out)]
    argv += ["--safe", "a clear path", "--unsafe", "a hazard"]
    done = subprocess.run(
        [sys.executable, "-m", "gymcurric", *argv],
        capture_output=True, text=True, timeout=300, preexec_fn=limit_file_size,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="RLIMIT_FSIZE needs a POSIX system")
@pytest.mark.parametrize("cut", ["a_frame", "report_json"])
def test_a_write_cut_off_midway_names_the_file_and_leaves_no_partial_file(tmp_path, capsys, cut):
    # a full disk fails a write after its file was opened: the error named the --out folder,
    # not the file, and the file stayed there cut off (a PNG that does not decode, a
    # report.json that does not parse) beside the message "N of M ... were written"
    model = cached_tiny("clip")
    frames = _uniform_frames(tmp_path / "frames", 40)
    whole = tmp_path / "run_1"  # as long a name as "run_2": report.json holds it
    assert probe(model, frames, "--out", whole) == 0
    capsys.readouterr()
    pngs = {p.name: p.stat().st_size for p in whole.glob("*_probe.png")}
    report_size = (whole / "report.json").stat().st_size
    assert max(pngs.values()) < report_size  # the sizes the two cuts rely on
    if cut == "a_frame":
        failed = max(sorted(pngs), key=pngs.get)  # the first of the largest
        limit = pngs[failed] - 1
    else:
        failed, limit = "report.json", report_size - 1
    out = tmp_path / "run_2"
    code, stdout, err = _probe_with_file_size_limit(model, frames, out, limit)
    assert code == 2, err
    _one_line_error(err, "'--out'", str(out / failed), "the report is on stdout")
    assert json.loads(stdout)["frames"]["n"] == 40
    assert not (out / failed).exists()
    assert not (out / "report.json").exists()
    for png in out.glob("*_probe.png"):  # what is left is whole
        with Image.open(png) as im:
            im.load()
