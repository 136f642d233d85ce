"""cache.staged_tree: a tree reaches its place in the cache whole, or not at all."""

from __future__ import annotations

import pytest

from specaudit.core.cache import staged_tree


def test_a_completed_tree_replaces_the_old_one_whole(tmp_path):
    dest = tmp_path / "tree"
    dest.mkdir()
    (dest / "stale.py").write_text("old")
    with staged_tree(dest, "vllm-0.32.0.whl") as staging:
        (staging / "new.py").write_text("new")
        assert not (dest / "new.py").exists()  # nothing shows before the block ends
    assert sorted(p.name for p in dest.iterdir()) == [".complete", "new.py"]
    assert (dest / ".complete").read_text() == "vllm-0.32.0.whl\n"
    assert [p.name for p in tmp_path.iterdir()] == ["tree"]  # no staging directory left beside it


def test_a_failed_tree_leaves_the_old_one_untouched(tmp_path):
    dest = tmp_path / "tree"
    dest.mkdir()
    (dest / "kept.py").write_text("old")
    with pytest.raises(OSError), staged_tree(dest, "vllm-0.32.0.whl") as staging:
        (staging / "half.py").write_text("half")
        raise OSError("the copy broke off")
    assert [p.name for p in dest.iterdir()] == ["kept.py"]
    assert [p.name for p in tmp_path.iterdir()] == ["tree"]


def test_a_tree_another_process_published_first_stands_and_ours_is_dropped(tmp_path):
    # Two cold scans of one release: the second to finish must not remove the tree the first is reading.
    dest = tmp_path / "tree"
    with staged_tree(dest, "vllm-0.32.0.whl") as ours:
        (ours / "a.py").write_text("ours")
        dest.mkdir()  # meanwhile, another process publishes the same release
        (dest / "a.py").write_text("theirs")
        (dest / ".complete").write_text("vllm-0.32.0.whl\n")
        held = (dest / "a.py").open()  # and reads it
    assert held.read() == "theirs" and (dest / "a.py").read_text() == "theirs"
    held.close()
    assert [p.name for p in tmp_path.iterdir()] == ["tree"]
