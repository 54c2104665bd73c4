"""Report files named after a study: one safe file name, always inside the report folder."""

import os

import pytest

from speedopt.errors import UsageError
from speedopt.reporting import inside, report_files, safe_name


@pytest.mark.parametrize(
    "name",
    ["../escape/x", "/abs/path/x", "nul\0byte", "..", ".", "", "a" * 3000, "sub/dir", "-rf", ".hidden", "naïve name",
     "a\\b", "line\nbreak"],
)
def test_hostile_names_become_one_plain_file_name(name):
    safe = safe_name(name)
    assert safe and safe not in (".", "..") and not safe.startswith((".", "-"))
    assert os.sep not in safe and "\0" not in safe and "\\" not in safe and "\n" not in safe
    assert len(safe) <= 90 and safe.isascii()


def test_changed_names_do_not_collide_and_plain_ones_are_kept():
    assert [safe_name(n) for n in ("small", "shapes-cpu-1a2b3c4d", "v1.2_run")] == ["small", "shapes-cpu-1a2b3c4d", "v1.2_run"]
    assert safe_name("../x") != safe_name("/x") != safe_name("x/")
    assert safe_name("../escape/x").startswith("escape-x-")


def test_inside_refuses_a_link_that_leads_out(tmp_path):
    folder, outside = tmp_path / "reports", tmp_path / "victim.md"
    folder.mkdir()
    outside.write_text("precious")
    (folder / "study.md").symlink_to(outside)
    with pytest.raises(UsageError, match="outside"):
        inside(folder, "study.md")
    with pytest.raises(UsageError, match="outside"):
        inside(folder, "../study.md")
    assert inside(folder, "other.md") == folder / "other.md"


def test_report_files_are_named_safely_inside_the_folder(tmp_path):
    files = report_files(tmp_path / "reports", "../escape/x")
    assert files.markdown.parent == files.csv.parent == tmp_path / "reports"
    assert files.figures.is_dir() and files.figures.parent == tmp_path / "reports"
    assert files.markdown.name == f"{files.link}.md" and files.link == files.figures.name
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [files.link]  # the write check left nothing


def test_report_files_in_a_folder_that_is_a_file(tmp_path):
    (tmp_path / "reports").write_text("a file")
    with pytest.raises(UsageError, match="pass --out"):
        report_files(tmp_path / "reports", "x")
