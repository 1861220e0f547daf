"""Credentials: explicit values, then BOURSE_URL/BOURSE_TOKEN, then a context (named, or
BOURSE_CONTEXT's, or the current one); contexts.json written 0600 and atomically; the legacy
credentials.json read as the context "default"."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from bourse.core.errors import InvalidInput
from bourse.sdk.config import (
    Credentials,
    credentials_path,
    load_credentials,
    resolve,
    resolve_credentials,
    save_credentials,
)
from bourse.sdk.contexts import config_dir, contexts_path, load_contexts
from bourse.sdk.errors import NotConfigured


def env(home: Path, **extra: str) -> dict[str, str]:
    return {"BOURSE_HOME": str(home), **extra}


def legacy(home: Path, url: str = "http://old:8470", token: str = "old-token") -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "credentials.json"
    path.write_text(json.dumps({"url": url, "token": token}))
    return path


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    path = save_credentials("http://x:8000", "s3cret", env(tmp_path / "home"))
    assert path == tmp_path / "home" / "contexts.json"
    assert load_credentials(env(tmp_path / "home")) == Credentials("http://x:8000", "s3cret")
    assert json.loads(path.read_text()) == {
        "current": "default",
        "contexts": {"default": {"url": "http://x:8000", "token": "s3cret"}}}


def test_file_is_0600_and_folder_0700(tmp_path: Path) -> None:
    old = os.umask(0)  # even a permissive umask must not widen the file's mode
    try:
        path = save_credentials("http://x", "t", env(tmp_path / "home"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_save_replaces_atomically_leaving_no_temporary(tmp_path: Path) -> None:
    save_credentials("http://old", "a", env(tmp_path))
    save_credentials("http://new", "b", env(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["contexts.json"]
    assert load_credentials(env(tmp_path)).url == "http://new"


def test_a_named_save_adds_a_context_and_makes_it_current(tmp_path: Path) -> None:
    save_credentials("http://a", "ta", env(tmp_path))
    save_credentials("http://b", "tb", env(tmp_path), context="lab")
    assert load_credentials(env(tmp_path)) == Credentials("http://b", "tb")
    assert load_contexts(env(tmp_path)).names == ["default", "lab"]


def test_environment_overrides_the_context_per_value(tmp_path: Path) -> None:
    save_credentials("http://file", "file-token", env(tmp_path))
    assert load_credentials(env(tmp_path, BOURSE_URL="http://env")) == Credentials(
        "http://env", "file-token")
    assert load_credentials(env(tmp_path, BOURSE_TOKEN="env-token")).token == "env-token"


def test_url_and_token_in_the_environment_win_over_a_named_context(tmp_path: Path) -> None:
    save_credentials("http://file", "file-token", env(tmp_path), context="lab")
    found = resolve(None, None, env(tmp_path, BOURSE_URL="http://e", BOURSE_TOKEN="t",
                                    BOURSE_CONTEXT="lab"))
    assert found.credentials == Credentials("http://e", "t")
    assert (found.url_from, found.token_from, found.context) == ("BOURSE_URL", "BOURSE_TOKEN",
                                                                 None)


def test_environment_alone_needs_no_file(tmp_path: Path) -> None:
    creds = load_credentials(env(tmp_path / "none", BOURSE_URL="http://e", BOURSE_TOKEN="t"))
    assert creds == Credentials("http://e", "t")


def test_explicit_values_win(tmp_path: Path) -> None:
    creds = resolve_credentials("http://arg", None, env(tmp_path, BOURSE_URL="http://env",
                                                         BOURSE_TOKEN="t"))
    assert creds == Credentials("http://arg", "t")


def test_a_context_is_chosen_by_argument_then_variable_then_current(tmp_path: Path) -> None:
    home = env(tmp_path)
    save_credentials("http://a", "ta", home, context="a")
    save_credentials("http://b", "tb", home, context="b")
    save_credentials("http://c", "tc", home, context="c")  # current
    assert resolve(None, None, home).context == "c"
    assert resolve(None, None, {**home, "BOURSE_CONTEXT": "b"}).context == "b"
    found = resolve(None, None, {**home, "BOURSE_CONTEXT": "b"}, context="a")
    assert (found.credentials, found.url_from) == (Credentials("http://a", "ta"), "context a")


def test_an_unknown_context_names_the_nearest(tmp_path: Path) -> None:
    save_credentials("http://p", "t", env(tmp_path), context="prod")
    with pytest.raises(InvalidInput, match=r"no context 'prdo'.*did you mean 'prod'"):
        load_credentials(env(tmp_path, BOURSE_CONTEXT="prdo"))


def test_missing_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(NotConfigured) as caught:
        load_credentials(env(tmp_path))
    text = str(caught.value)
    assert "bourse up" in text and "bourse login" in text and "bourse context add" in text
    assert str(contexts_path(env(tmp_path))) in text
    assert caught.value.exit_code == 2


def test_missing_token_only_is_named(tmp_path: Path) -> None:
    with pytest.raises(NotConfigured, match="no exchange token"):
        load_credentials(env(tmp_path, BOURSE_URL="http://e"))


def test_the_config_dir_is_bourse_home_else_xdg_else_dot_config(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_dir({}) == tmp_path / ".config" / "bourse"
    assert config_dir({"XDG_CONFIG_HOME": "/x/conf"}) == Path("/x/conf/bourse")
    assert config_dir({"XDG_CONFIG_HOME": "relative"}) == tmp_path / ".config" / "bourse"
    assert config_dir({"BOURSE_HOME": "/b", "XDG_CONFIG_HOME": "/x"}) == Path("/b")
    assert credentials_path({}) == tmp_path / ".bourse" / "credentials.json"  # the legacy one


def test_the_legacy_file_is_read_as_default(tmp_path: Path) -> None:
    legacy(tmp_path)
    found = resolve(None, None, env(tmp_path))
    assert found.credentials == Credentials("http://old:8470", "old-token")
    assert found.context == "default"


def test_the_first_write_migrates_the_legacy_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without BOURSE_HOME the legacy file is ~/.bourse/credentials.json and contexts live in
    ~/.config/bourse: the first write copies it in, and from then on it is not read."""
    monkeypatch.setenv("HOME", str(tmp_path))
    old = legacy(tmp_path / ".bourse")
    save_credentials("http://new", "new-token", {}, context="lab")
    stored = load_contexts({})
    assert stored.path == tmp_path / ".config" / "bourse" / "contexts.json"
    assert [(c.name, c.url) for c in stored.entries] == [("default", "http://old:8470"),
                                                        ("lab", "http://new")]
    assert stored.current == "lab"
    old.write_text(json.dumps({"url": "http://changed", "token": "x"}))
    assert load_contexts({}).get("default").url == "http://old:8470"


@pytest.mark.parametrize(("name", "text", "says"), [
    ("credentials.json", "{not json", "is not JSON"),
    ("credentials.json", '{"url": 3}', "not a JSON object with string url and token"),
    ("contexts.json", "[]", 'not a JSON object with a "contexts" object'),
    ("contexts.json", '{"contexts": {"a": {"url": "http://a"}}}', "context 'a' without"),
    ("contexts.json", '{"current": 1, "contexts": {}}', '"current" that is not a string'),
])
def test_a_corrupt_file_is_invalid_input_naming_it(tmp_path: Path, name: str, text: str,
                                                   says: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(InvalidInput, match=says) as caught:
        load_credentials(env(tmp_path))
    assert str(tmp_path / name) in str(caught.value)


@pytest.mark.parametrize(("url", "token", "context", "field"), [
    ("ftp://x", "t", "default", "url"),
    ("http://x", "two words", "default", "token"),
    ("http://x", "t", "-bad", "context"),
])
def test_bad_values_are_refused_before_anything_is_written(
        tmp_path: Path, url: str, token: str, context: str, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        save_credentials(url, token, env(tmp_path), context=context)
    assert caught.value.field == field
    assert not (tmp_path / "contexts.json").exists()


def test_repr_hides_token(tmp_path: Path) -> None:
    save_credentials("http://x", "s3cret", env(tmp_path))
    assert "s3cret" not in repr(Credentials("http://x", "s3cret"))
    assert "s3cret" not in repr(load_contexts(env(tmp_path)))


def test_the_clients_resolve_a_named_context(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from bourse.sdk import AsyncClient, Client
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path))
    for name in ("BOURSE_URL", "BOURSE_TOKEN", "BOURSE_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    save_credentials("http://a:1", "ta", context="a")
    save_credentials("http://b:2", "tb", context="b")
    with Client(context="a") as client:
        assert client.url == "http://a:1"
    assert AsyncClient(context="a").url == "http://a:1"
    with Client() as current:
        assert current.url == "http://b:2"
