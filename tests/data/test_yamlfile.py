"""The bounded YAML reader: ordinary files load, bombs, huge and self-referring files are one UsageError."""

import pytest

from speedopt.data._yamlfile import MAX_BYTES, read_yaml
from speedopt.errors import UsageError


def test_billion_laughs_is_refused_before_it_expands(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("base: &b {batch: [8, 16]}\nother: *b\nnames: [a, b]\n")  # a few aliases are fine
    assert read_yaml(ok, "data.yaml") == {"base": {"batch": [8, 16]}, "other": {"batch": [8, 16]}, "names": ["a", "b"]}
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi")]
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\nnames: *i\n")
    with pytest.raises(UsageError, match="aliases would expand it to more than"):
        read_yaml(f, "data.yaml")


def test_alias_inside_itself_is_refused(tmp_path):
    f = tmp_path / "loop.yaml"
    f.write_text("names: &n [a, *n]\n")
    with pytest.raises(UsageError, match="refers to the node containing it"):
        read_yaml(f, "data.yaml")


def test_file_over_the_cap_is_refused_unread(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("names: [a]\n#" + "x" * MAX_BYTES + "\n")
    with pytest.raises(UsageError, match="larger than 1024 KiB"):
        read_yaml(f, "data.yaml")


@pytest.mark.parametrize(
    "text, match",
    [
        ("a: " + "[" * 20000 + "]" * 20000, "nests its YAML too deeply"),
        ("a: " + "9" * 5000, "holds a value YAML cannot read"),
        ("a: [unclosed\n", "not valid YAML at line"),
    ],
)
def test_unreadable_content_is_one_line(tmp_path, text, match):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(UsageError, match=match) as info:
        read_yaml(f, "space file")
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(UsageError, match="cannot read data.yaml"):
        read_yaml(tmp_path / "nope.yaml", "data.yaml")
