"""``bourse up`` keeps its admin token as the context ``local``: read from the coordinator's
``admin-token``, or, for an exchange started by a version before contexts, from the legacy
credentials file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bourse.local.exchange import LocalExchange
from bourse.local.inventory import LocalExchangeError
from bourse.sdk.config import load_credentials
from bourse.sdk.contexts import load_contexts

URL = "http://127.0.0.1:8470"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "home"))
    for name in ("BOURSE_URL", "BOURSE_TOKEN", "BOURSE_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


def write(path: Path, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": URL, "token": token}))


def test_the_admin_token_becomes_the_current_context_local(home: Path, tmp_path: Path) -> None:
    exchange = LocalExchange(tmp_path / "local")
    write(exchange.admin_token, "fresh-admin")
    write(home / "credentials.json", "a-remote-exchanges")  # an older login: kept as default
    assert exchange._token(URL) == "fresh-admin"
    stored = load_contexts()
    assert stored.current == "local" and stored.get("default").token == "a-remote-exchanges"
    assert load_credentials().token == "fresh-admin"


def test_an_exchange_from_before_contexts_is_found_in_the_legacy_file(home: Path,
                                                                       tmp_path: Path) -> None:
    write(home / "credentials.json", "old-admin")
    assert LocalExchange(tmp_path / "local")._token(URL) == "old-admin"
    assert load_contexts().get("local").token == "old-admin"


def test_no_token_anywhere_names_where_it_should_be(home: Path, tmp_path: Path) -> None:
    exchange = LocalExchange(tmp_path / "local")
    with pytest.raises(LocalExchangeError, match=r"admin token is not in .*admin-token"):
        exchange._token(URL)
