"""Which files of a datapack (or enrichment) folder are read: hidden names, broken links."""

from __future__ import annotations

import json
import os

import pytest

from gymcurric.datapacks import load_datapacks, validate_datapacks
from gymcurric.errors import DataError

from .packs import minimal


def _write_jsonl(path, *pack_ids):
    path.write_text("".join(json.dumps(minimal(p, 0)) + "\n" for p in pack_ids))


def _record_listings(monkeypatch) -> list[str]:
    """The folders ``os.scandir`` lists from now on (``os.walk`` lists through it), in order."""
    listed: list[str] = []
    scandir = os.scandir

    def listing(path="."):
        listed.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", listing)
    return listed


def test_hidden_files_and_folders_are_skipped(tmp_path):
    # macOS's AppleDouble '._a.jsonl' (binary, not UTF-8) stopped the load; a hidden copy of a
    # pack file ('.a.jsonl') or one in a hidden folder ('.trash/', '.git/') was read as data
    _write_jsonl(tmp_path / "a.jsonl", "a1", "a2")
    (tmp_path / "._a.jsonl").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X\xff\xfe")
    _write_jsonl(tmp_path / ".a.jsonl", "hidden")
    (tmp_path / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    for folder in (".trash", ".git", "sub/.cache"):
        (tmp_path / folder).mkdir(parents=True)
        _write_jsonl(tmp_path / folder / "b.jsonl", f"in {folder}")
    _write_jsonl(tmp_path / "sub" / "c.json", "c1")
    os.symlink("user@host.123:1700000000", tmp_path / ".#a.jsonl")  # Emacs's lock: broken
    assert [p.pack_id for p in load_datapacks(tmp_path)] == ["a1", "a2"]
    deep_packs = load_datapacks(tmp_path, recursive=True)
    assert [p.pack_id for p in deep_packs] == ["a1", "a2", "c1"]
    assert validate_datapacks(tmp_path, recursive=True) == (deep_packs, [])
    # one named as the path is read: it was asked for
    assert [p.pack_id for p in load_datapacks(tmp_path / ".a.jsonl")] == ["hidden"]
    assert [p.pack_id for p in load_datapacks(tmp_path / ".trash")] == ["in .trash"]


def test_a_folder_of_only_hidden_data_files_says_they_were_skipped(tmp_path):
    _write_jsonl(tmp_path / ".a.jsonl", "a1")
    with pytest.raises(DataError) as caught:
        load_datapacks(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: no .json or .jsonl datapack files found (suffix in any case; subfolders "
        f"not searched, hidden ones skipped ('{tmp_path / '.a.jsonl'}'))"
    )


@pytest.mark.parametrize("target", ["moved/b.jsonl", "/nowhere/b.jsonl", "b.jsonl"])
def test_a_broken_link_to_a_data_file_is_refused_naming_it_and_its_target(tmp_path, target):
    # it was left out without a word, so the packs it stood for were silently not sampled
    # ('b.jsonl' links to itself: a loop)
    _write_jsonl(tmp_path / "a.jsonl", "a1")
    os.symlink(target, tmp_path / "b.jsonl")
    expected = (
        f"{tmp_path / 'b.jsonl'}: a broken symbolic link (to {target!r}, which does not exist "
        "or loops); fix or remove it, as the datapack records it stood for would be left out"
    )
    for recursive in (False, True):
        with pytest.raises(DataError) as caught:
            load_datapacks(tmp_path, recursive=recursive)
        assert str(caught.value) == expected
        assert validate_datapacks(tmp_path, recursive=recursive) == ([], [expected])


def test_broken_links_that_stood_for_no_data_file(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", "a1")
    os.symlink("nowhere", tmp_path / "notes.txt")  # not data: left alone
    os.symlink("/mnt/old_packs", tmp_path / "old")  # a folder of packs once, maybe
    assert [p.pack_id for p in load_datapacks(tmp_path)] == ["a1"]  # subfolders not read
    # with subfolders searched, any broken link may have been a folder of packs
    with pytest.raises(DataError, match=r"notes.txt: a broken symbolic link \(to 'nowhere'"):
        load_datapacks(tmp_path, recursive=True)
    os.unlink(tmp_path / "notes.txt")
    with pytest.raises(DataError, match=r"old: a broken symbolic link \(to '/mnt/old_packs'"):
        load_datapacks(tmp_path, recursive=True)


def test_a_broken_link_given_as_the_path_names_its_target(tmp_path):
    os.symlink(tmp_path / "gone", tmp_path / "packs")
    with pytest.raises(DataError, match=r"packs: a broken symbolic link \(to '.*gone'"):
        load_datapacks(tmp_path / "packs")
    with pytest.raises(DataError, match="no such file or directory"):
        load_datapacks(tmp_path / "nope")


def test_an_enrichment_folder_is_listed_the_same_way(tmp_path):
    packs, enrich = tmp_path / "packs", tmp_path / "enrich"
    packs.mkdir()
    enrich.mkdir()
    _write_jsonl(packs / "a.jsonl", "a1")
    (enrich / "e.jsonl").write_text(json.dumps({"pack_id": "a1", "enrichment": {}}) + "\n")
    (enrich / "._e.jsonl").write_bytes(b"\x00\x05\x16\x07Mac OS X\xff")
    assert [p.pack_id for p in load_datapacks(packs, enrichment_dir=enrich)] == ["a1"]
    os.symlink("gone.jsonl", enrich / "f.jsonl")
    with pytest.raises(DataError, match="the enrichment records it stood for"):
        load_datapacks(packs, enrichment_dir=enrich)


def test_a_linked_folder_is_searched_as_a_subfolder(tmp_path, monkeypatch):
    # Path.glob("**/*") does not go into a symbolic link to a folder, so its packs were left
    # out without a word, while a broken link there is refused as a folder of packs it may be
    packs, elsewhere = tmp_path / "packs", tmp_path / "elsewhere"
    (packs / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    _write_jsonl(packs / "a.jsonl", "a1")
    _write_jsonl(packs / "sub" / "b.jsonl", "b1")
    _write_jsonl(elsewhere / "c.jsonl", "c1")
    os.symlink(elsewhere, packs / "extra")
    os.symlink("..", packs / "sub" / "up")  # a loop: the folder it is in, read once
    os.symlink(".", packs / "self")
    deep_packs = load_datapacks(packs, recursive=True)
    assert [(p.pack_id, p.source) for p in deep_packs] == [
        ("a1", str(packs / "a.jsonl")),
        ("c1", str(packs / "extra" / "c.jsonl")),
        ("b1", str(packs / "sub" / "b.jsonl")),
    ]
    assert validate_datapacks(packs, recursive=True) == (deep_packs, [])
    assert [p.pack_id for p in load_datapacks(packs)] == ["a1"]  # subfolders not searched
    # the root given as a hidden link to the folder, or as '.': the same packs
    os.symlink(packs, tmp_path / ".packs")
    expected = ["a1", "c1", "b1"]
    assert [p.pack_id for p in load_datapacks(tmp_path / ".packs", recursive=True)] == expected
    monkeypatch.chdir(packs)
    assert [p.pack_id for p in load_datapacks(".", recursive=True)] == expected


def test_a_hidden_link_to_a_folder_is_not_walked(tmp_path, monkeypatch):
    # nothing under a hidden name is read, so following such a link (.data -> /mnt/big, or a
    # link inside .git) would only walk a tree to skip all of it
    packs, big = tmp_path / "packs", tmp_path / "big"
    (packs / ".git").mkdir(parents=True)
    (big / "deep").mkdir(parents=True)
    _write_jsonl(packs / "a.jsonl", "a1")
    _write_jsonl(big / "deep" / "b.jsonl", "b1")
    os.symlink(big, packs / ".data")
    os.symlink(big, packs / ".git" / "modules")
    listed = _record_listings(monkeypatch)
    assert [p.pack_id for p in load_datapacks(packs, recursive=True)] == ["a1"]
    assert not [path for path in listed if "data" in path or "modules" in path], listed


def test_each_real_folder_is_read_once_whatever_links_reach_it(tmp_path):
    # 7554a37 walked every path through the links that led to no ancestor: a folder the tree
    # holds was read again through a link to it (latest -> v2, a/x -> ../b), a duplicate
    # pack_id error for the same file, and links among n sibling folders walked every path
    # through them (7 folders: 13,699 files listed, exponential in n)
    packs, outside = tmp_path / "packs", tmp_path / "outside"
    for name in ("v2", "a", "b"):
        (packs / name).mkdir(parents=True)
        _write_jsonl(packs / name / "p.jsonl", name)
    outside.mkdir()
    _write_jsonl(outside / "o.jsonl", "o1")
    os.symlink("v2", packs / "latest")
    os.symlink("../b", packs / "a" / "x")
    os.symlink("../a", packs / "b" / "y")
    os.symlink(outside, packs / "z2")  # a folder outside, reached twice: at the first link
    os.symlink(outside, packs / "z1")
    os.symlink(packs, outside / "back")  # and linking back to the root
    deep_packs = load_datapacks(packs, recursive=True)
    assert [(p.pack_id, p.source) for p in deep_packs] == [
        ("a", str(packs / "a" / "p.jsonl")),
        ("b", str(packs / "b" / "p.jsonl")),
        ("v2", str(packs / "v2" / "p.jsonl")),
        ("o1", str(packs / "z1" / "o.jsonl")),
    ]
    assert validate_datapacks(packs, recursive=True) == (deep_packs, [])


def test_links_among_sibling_folders_walk_each_folder_once(tmp_path, monkeypatch):
    for i in range(6):
        (tmp_path / f"d{i}").mkdir()
        _write_jsonl(tmp_path / f"d{i}" / "p.jsonl", f"p{i}")
    for i in range(6):
        for j in range(6):
            if i != j:
                os.symlink(f"../d{j}", tmp_path / f"d{i}" / f"to{j}")
    listed = _record_listings(monkeypatch)
    assert [p.pack_id for p in load_datapacks(tmp_path, recursive=True)] == [
        f"p{i}" for i in range(6)
    ]
    assert len(listed) <= 2 * 7, len(listed)  # the root and 6 folders, listed twice at most


def test_a_link_to_a_folder_holding_the_root_reads_the_root_once(tmp_path):
    # packs/up -> .. walks the parent, which holds packs itself: not walked again
    packs = tmp_path / "packs"
    packs.mkdir()
    _write_jsonl(packs / "a.jsonl", "a1")
    _write_jsonl(tmp_path / "p.jsonl", "p1")
    os.symlink("..", packs / "up")
    assert [(p.pack_id, p.source) for p in load_datapacks(packs, recursive=True)] == [
        ("a1", str(packs / "a.jsonl")),
        ("p1", str(packs / "up" / "p.jsonl")),
    ]
