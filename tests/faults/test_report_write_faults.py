"""Issue 44, item 4: a report writes every file (markdown, CSV, figures) whole and never through a link
planted where it writes, and uploads to the dashboard only the figures it wrote.

The fast cases call the writers directly; the slow one runs ``speedopt report`` on a copy of the
session's small study with a link planted where a figure goes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import optuna
import pandas as pd
import pytest

from speedopt.errors import UsageError
from speedopt.reporting import _artifacts, _figures, report_files, write_csv
from speedopt.reporting._filename import write_inside
from tests.faults.conftest import Faults, one_line_error

PRECIOUS = b"precious: not a PNG\n"


def _table() -> pd.DataFrame:
    """A two-trial table with what the history figure reads."""
    return pd.DataFrame({
        "number": [0, 1], "images_per_s": [10.0, 12.5], "status": ["ok", "ok"],
        "feasibility": ["feasible", "feasible"], "ci_rel": [0.02, 0.03],
    })


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(PRECIOUS)
    return victim


def test_report_files_refuse_a_figure_link_that_leads_out(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    figures = tmp_path / "reports" / "study"
    figures.mkdir(parents=True)
    (figures / "history.png").symlink_to(victim)
    with pytest.raises(UsageError, match=r"refusing to write .*history\.png.*outside") as caught:
        report_files(tmp_path / "reports", "study")
    assert "\n" not in str(caught.value)
    assert victim.read_bytes() == PRECIOUS


def test_a_figure_is_never_written_through_a_link(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    figures = tmp_path / "reports" / "study"
    figures.mkdir(parents=True)
    (figures / "history.png").symlink_to(victim)
    with pytest.raises(UsageError, match="outside"):
        _figures.history(_table(), figures / "history.png")
    assert victim.read_bytes() == PRECIOUS
    # A link that stays inside the folder is replaced by the figure; the file it led to keeps its bytes.
    kept = figures / "mine.png"
    kept.write_bytes(PRECIOUS)
    (figures / "knobs.png").symlink_to(kept.name)
    written = _figures.history(_table(), figures / "knobs.png")
    assert not written.is_symlink() and written.read_bytes().startswith(b"\x89PNG")
    assert kept.read_bytes() == PRECIOUS
    assert sorted(p.name for p in figures.iterdir()) == ["history.png", "knobs.png", "mine.png"]  # no temp left


def test_the_csv_is_not_written_through_a_link_at_its_temporary_name(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "study.csv.tmp").symlink_to(victim)  # the name the CSV used to be written under first
    (folder / "study.csv").symlink_to(victim)
    with pytest.raises(UsageError, match="outside"):
        write_csv(_table(), folder / "study.csv")
    (folder / "study.csv").unlink()
    written = write_csv(_table(), folder / "study.csv")
    assert written.read_text().startswith("number,") and not written.is_symlink()
    assert victim.read_bytes() == PRECIOUS


def test_the_markdown_writer_replaces_a_link_to_a_sibling(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    notes = folder / "notes.md"
    notes.write_bytes(PRECIOUS)
    (folder / "study.md").symlink_to(notes.name)
    write_inside(folder / "study.md", lambda handle: handle.write(b"# report\n"))
    assert (folder / "study.md").read_bytes() == b"# report\n" and not (folder / "study.md").is_symlink()
    assert notes.read_bytes() == PRECIOUS
    loop = folder / "loop.png"
    loop.symlink_to(loop.name)
    with pytest.raises(UsageError, match="loop of links"):
        write_inside(loop, lambda handle: handle.write(b"x"))


def test_the_dashboard_upload_reads_no_link(tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/s.db", study_name="s")
    secret = tmp_path / "id_rsa"
    secret.write_bytes(b"-----BEGIN PRIVATE KEY-----\n")
    figures = tmp_path / "reports" / "s"
    figures.mkdir(parents=True)
    (figures / "history.png").write_bytes(b"\x89PNG fake")
    (figures / "knobs.png").symlink_to(secret)
    store = tmp_path / "artifacts"
    with pytest.raises(UsageError, match="knobs.png: it is a link"):
        _artifacts.upload(study, store, [figures / "history.png", figures / "knobs.png"])
    digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in store.rglob("*") if p.is_file()}
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in digests
    links = _artifacts.upload(study, store, [figures / "history.png"])
    assert list(links) == ["history.png"]
    assert [p.read_bytes() for p in store.rglob("*") if p.is_file()] == [b"\x89PNG fake"]


@pytest.mark.slow
def test_report_refuses_a_figure_link_planted_in_its_folder(small_study: tuple[Path, str, str], faults: Faults) -> None:
    _, url, small = small_study
    target = f"sqlite:///{faults.root}/hostile.db"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.copy_study(from_study_name=small, from_storage=url, to_storage=target, to_study_name="planted")
    victim = _victim(faults.root)
    (faults.work / "reports" / "planted").mkdir(parents=True)
    (faults.work / "reports" / "planted" / "history.png").symlink_to(victim)
    faults.watch(victim, faults.work / "reports")
    done = faults.run("report", "--storage", target, "--study", "planted", timeout=300)
    one_line_error(done, "refusing", "history.png", "outside")
    faults.unchanged()


@pytest.mark.parametrize("out", ["reports", "reports/nested", "./reports"])
def test_a_reports_folder_that_is_a_link_is_not_written_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               out: str) -> None:
    """Issue 54, item 5: ``reports -> elsewhere/`` (git keeps links, so a cloned repository can ship one). The per-file
    check resolved files inside the link's target; the folder on the way is checked from the working folder down."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "s.md").write_bytes(PRECIOUS)
    work = tmp_path / "work"
    work.mkdir()
    (work / "reports").symlink_to(elsewhere)
    monkeypatch.chdir(work)
    with pytest.raises(UsageError, match=r"refusing to write the report in .*reports is a link .*elsewhere") as refused:
        report_files(Path(out), "s")
    assert "\n" not in str(refused.value)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["s.md"] and (elsewhere / "s.md").read_bytes() == PRECIOUS
    assert report_files(tmp_path / "work" / "reports", "s").markdown.parent == work / "reports"  # named by its full path
