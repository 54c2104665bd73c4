"""Storage URLs, files and study look-up: one clear line for everything a user can get wrong."""

import optuna
import pytest

from speedopt.errors import UsageError
from speedopt.quality import CACHE_STUDY
from speedopt.study import find_study, open_storage, split_source, study_names, url_for


def test_url_for_files_and_urls(tmp_path):
    assert url_for("postgresql://u@h/db") == "postgresql://u@h/db"
    assert url_for(str(tmp_path / "a.db")) == f"sqlite:///{tmp_path / 'a.db'}"
    assert url_for(str(tmp_path / "a.log")) == f"journal:{tmp_path / 'a.log'}"
    with pytest.raises(UsageError, match="neither a storage URL"):
        url_for(str(tmp_path / "a.txt"))
    assert split_source(f"{tmp_path / 'a.db'}::mine") == (f"sqlite:///{tmp_path / 'a.db'}", "mine")


def test_open_storage_kinds_and_errors(tmp_path):
    assert isinstance(open_storage(f"journal:{tmp_path / 'j.log'}"), optuna.storages.JournalStorage)
    assert isinstance(open_storage(f"sqlite:///{tmp_path}/new/s.db"), optuna.storages.BaseStorage)
    assert (tmp_path / "new").is_dir()  # the folder of a new SQLite file is made
    with pytest.raises(UsageError, match="is not a storage URL"):
        open_storage("studies/x")
    with pytest.raises(UsageError, match="cannot open storage"):
        open_storage("nosuchdb://x")


def test_find_study_by_name_or_the_only_one(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(UsageError, match="0 studies"):
        find_study(url, None)
    optuna.create_study(study_name="a", storage=url)
    optuna.create_study(study_name=CACHE_STUDY, storage=url)  # internal: never counted
    assert find_study(url, None).study_name == "a" and study_names(open_storage(url)) == ["a"]
    optuna.create_study(study_name="b", storage=url)
    with pytest.raises(UsageError, match="2 studies .*: a, b; name one with --study"):
        find_study(url, None)
    with pytest.raises(UsageError, match="no study 'c'"):
        find_study(url, "c")
