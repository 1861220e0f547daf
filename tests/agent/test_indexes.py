"""Where job environments get packages: pip's configuration read the way pip reads it."""

from __future__ import annotations

from pathlib import Path

from bourse.agent.indexes import PackageSources, from_pip_config, pip_config_files, pip_sources

GLOBAL = "[global]\nindex-url = https://mirror/simple\nfind-links = /opt/wheels\n"
USER = ("[global]\nextra-index-url =\n    file:///a/simple\n    file:///b/simple\n"
        "[install]\nfind-links = /w1 /w2\n")


def test_later_files_and_the_install_section_win_and_lists_split_on_whitespace() -> None:
    sources = from_pip_config([GLOBAL, USER], {})
    assert sources == PackageSources(index_url="https://mirror/simple",
                                     extra_index_urls=("file:///a/simple", "file:///b/simple"),
                                     find_links=("/w1", "/w2"))
    assert sources.uv_args() == [
        "--index-url", "https://mirror/simple", "--extra-index-url", "file:///a/simple",
        "--extra-index-url", "file:///b/simple", "--find-links", "/w1", "--find-links", "/w2"]


def test_pip_variables_override_files_and_no_index_keeps_only_find_links() -> None:
    sources = from_pip_config([GLOBAL], {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/x"})
    assert sources.uv_args() == ["--no-index", "--find-links", "/x"]
    assert sources.describe() == "/x"


def test_an_unreadable_file_adds_nothing() -> None:
    assert from_pip_config(["not an ini [", GLOBAL], {}).index_url == "https://mirror/simple"
    assert from_pip_config([], {}) == PackageSources()
    assert PackageSources().describe() == "PyPI"


def test_files_in_pips_order(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_DIRS": f"{tmp_path}/x1:{tmp_path}/x2",
           "PIP_CONFIG_FILE": str(tmp_path / "last.conf")}
    assert pip_config_files(env) == [
        tmp_path / "x2/pip/pip.conf", tmp_path / "x1/pip/pip.conf", Path("/etc/pip.conf"),
        tmp_path / ".pip/pip.conf", tmp_path / ".config/pip/pip.conf", tmp_path / "last.conf"]
    (tmp_path / "last.conf").write_text("[global]\nindex-url = file:///last\n")
    assert pip_sources(env).index_url == "file:///last"
