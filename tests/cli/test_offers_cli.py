"""``bourse offers`` and ``bourse gpus`` through click's CliRunner (click >= 8.2: stderr apart)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from cli_exchange import FakeExchange
from click.testing import CliRunner, Result

from bourse.cli.main import cli
from bourse.core.compute import Compute
from bourse.core.match import match
from bourse.market.catalogs import catalog_offers


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def table(stdout: str) -> list[dict[str, str]]:
    """Rows of the offers table. Instance and region cells may hold spaces; the GPU id and the
    four numeric columns between them never do."""
    lines = stdout.splitlines()
    header = lines[0]
    assert header.split() == ["PROVIDER", "INSTANCE", "GPU", "COUNT", "GPU", "MEM", "$/H",
                              "SPOT", "$/H", "REGION"]
    instance, gpu, region = (header.index(h) for h in ("INSTANCE", "GPU", "REGION"))
    rows = []
    for line in lines[1:]:
        if not line.strip():
            break
        middle = line[gpu:region].split()
        assert len(middle) == 5, line
        rows.append(dict(zip(
            ["PROVIDER", "INSTANCE", "GPU", "COUNT", "GPU MEM", "$/H", "SPOT $/H", "REGION"],
            [line[:instance].strip(), line[instance:gpu].strip(), *middle,
             line[region:].strip()], strict=True)))
    return rows


def test_cheapest_first_under_the_ceiling() -> None:
    result = run("offers", "--gpu", "a100-40gb", "--max-price", "2")
    assert result.exit_code == 0, result.output
    rows = table(result.stdout)
    assert len(rows) == 20  # the default --limit
    prices = [float(r["$/H"]) for r in rows]
    assert prices == sorted(prices)
    assert all(p <= 2 for p in prices)
    assert {r["GPU"] for r in rows} == {"a100-40gb"}
    assert {r["COUNT"] for r in rows} == {"1"}
    expected = match(Compute("a100-40gb", max_price=2), catalog_offers(), 20)
    assert [r["$/H"] for r in rows] == [f"{m.price:.2f}" for m in expected]
    assert [r["INSTANCE"] for r in rows] == [m.offer.instance_type for m in expected]


def test_limit() -> None:
    result = run("offers", "--gpu", "h100", "--gpus", "8", "--limit", "3")
    assert result.exit_code == 0, result.output
    rows = table(result.stdout)
    assert len(rows) == 3
    assert {r["GPU"] for r in rows} <= {"h100-80gb", "h100-nvl"}
    assert {r["COUNT"] for r in rows} == {"8"}
    assert "means any h100" in result.stderr  # the family note


def test_unknown_gpu_suggests() -> None:
    result = run("offers", "--gpu", "a100-40")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "a100-40gb" in result.stderr
    assert "unknown GPU" in result.stderr


def test_no_match_exits_1_and_explains() -> None:
    result = run("offers", "--gpu", "a100-40gb", "--max-price", "0.01")
    assert result.exit_code == 1
    assert result.stdout == ""
    err = result.stderr
    assert "no offer matches" in err
    assert "max_price" in err
    assert "0 matched" in err
    assert "nearest rejected offers:" in err


def test_json_output() -> None:
    result = run("offers", "--gpu", "a100-40gb", "--max-price", "2", "--json", "--limit", "5")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    offers = data["offers"]
    assert len(offers) == 5
    prices = [o["price_per_hour"] for o in offers]
    assert prices == sorted(prices)
    assert all(0 < p <= 2 for p in prices)
    assert all(o["offer"]["gpu"] == "a100-40gb" for o in offers)
    assert all(o["spot"] is False for o in offers)
    assert data["compute"]["gpu"]["models"] == ["a100-40gb"]
    assert data["compute"]["max_price"] == 2


def test_json_no_match_still_parses() -> None:
    result = run("offers", "--gpu", "b200", "--max-price", "0.01", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["offers"] == []
    assert data["explanation"]["matched"] == 0


def test_verbose_shows_capabilities() -> None:
    result = run("offers", "--gpu", "a100-40gb", "--provider", "lambda", "--limit", "2", "-v")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for fact in ("id", "you pay", "gpu", "cpus", "memory", "disk", "driver", "source"):
        assert f"  {fact} " in out
    assert "installed at provisioning" in out
    assert "(on-demand)" in out
    assert "40960 MiB each" in out


def test_spot_only() -> None:
    result = run("offers", "--gpu", "a100", "--spot", "only", "--limit", "10", "--json")
    assert result.exit_code == 0, result.output
    offers = json.loads(result.stdout)["offers"]
    assert offers
    assert all(o["spot"] is True for o in offers)
    assert all(o["price_per_hour"] == o["offer"]["spot_price"] for o in offers)
    paid = [o["price_per_hour"] for o in offers]
    assert paid == sorted(paid)
    human = run("offers", "--gpu", "a100", "--spot", "only", "--limit", "10")
    assert [r["SPOT $/H"] for r in table(human.stdout)] == [f"{p:.2f}" for p in paid]


def test_accelerator_only_prices_show_as_lower_bounds() -> None:
    result = run("offers", "--gpu", "a100-40gb", "--provider", "gcp", "--limit", "3", "-v")
    assert result.exit_code == 0, result.output
    rows = table(result.stdout)
    assert len(rows) == 3
    assert all(r["$/H"].endswith("+") for r in rows)
    assert all(r["INSTANCE"] == "A100 x1 (accelerator only)" for r in rows)
    assert "price excludes the host VM" in result.stdout


def test_lower_bounds_rank_after_complete_prices() -> None:
    result = run("offers", "--gpu", "a100-40gb", "--provider", "gcp", "--provider", "lambda",
                 "--limit", "200", "--json")
    offers = json.loads(result.stdout)["offers"]
    floors = [o["offer"]["price_is_floor"] for o in offers]
    assert True in floors and False in floors
    assert floors == sorted(floors)  # every complete price first


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--max-price", "cheap"], "--max-price"),
        (["--max-price", "0"], "--max-price"),
        (["--gpus", "0"], "gpus"),
        (["--gpus", "x"], "--gpus"),
        (["--spot", "maybe"], "--spot"),
        (["--gpu", "a100:0"], "gpu"),
        (["--cpus", "32..8"], "cpus"),
        (["--cuda", ">=12.1"], "cuda"),
        (["--gpu", "a100", "--torch", "9.9"], "torch"),
        (["--limit", "0"], "--limit"),
    ],
)
def test_bad_flags_exit_2(args: list[str], says: str) -> None:
    result = run("offers", *args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert result.stdout == ""


def test_gpus_lists_the_catalogue() -> None:
    result = run("gpus")
    assert result.exit_code == 0
    ids = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    assert "a100-40gb" in ids
    assert "rtx-4090" in ids
    assert len(ids) == len(set(ids)) >= 40


def test_gpus_family() -> None:
    result = run("gpus", "a100")
    assert result.exit_code == 0
    ids = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    assert ids == ["a100-40gb", "a100-80gb"]


def test_gpus_unknown_label() -> None:
    result = run("gpus", "a100-40")
    assert result.exit_code == 2
    assert "a100-40gb" in result.stderr


def test_gpus_json() -> None:
    result = run("gpus", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    by_id = {m["id"]: m for m in data}
    assert by_id["a100-40gb"]["family"] == "a100"
    assert by_id["a100-40gb"]["memory_gb"] == 40
    assert by_id["h100-nvl"]["compute_capability"] == [9, 0]
    one = json.loads(run("gpus", "rtx4090", "--json").stdout)
    assert [m["id"] for m in one] == ["rtx-4090"]


def test_offers_near_the_data_rank_first_among_equal_prices() -> None:
    plain = run("offers", "--gpu", "a100-80gb:8", "--limit", "6", "--json")
    near = run("offers", "--gpu", "a100-80gb:8", "--limit", "6", "--json",
               "--data-region", "EU-CZ-1")
    assert plain.exit_code == near.exit_code == 0, near.output
    prices = [[o["price_per_hour"] for o in json.loads(r.stdout)["offers"]] for r in (plain, near)]
    assert prices[0] == prices[1]
    zones = [o["offer"]["zone"] for o in json.loads(near.stdout)["offers"]]
    assert "EU-CZ-1" in zones and "EU-CZ-1" not in [
        o["offer"]["zone"] for o in json.loads(plain.stdout)["offers"]]


def test_explain_shows_the_cross_region_penalty() -> None:
    result = run("offers", "--gpu", "a100-80gb:8", "--explain", "--data-region", "us-east-1")
    assert result.exit_code == 0
    assert "cross-region: the data is in us-east-1;" in result.stdout + result.stderr


def test_an_agent_region_must_be_a_plain_name() -> None:
    result = run("agent", "--server", "http://127.0.0.1:1", "--region", "us east/1")
    assert result.exit_code == 2
    assert "--region" in result.output and "e.g. us-east-1" in result.output


def test_package_and_image_flags_make_the_compute() -> None:
    from bourse.cli.offers import compute_from_flags

    compute = compute_from_flags({"package": ("attrs>=23,<24", "six"), "torch": "2.1"})
    assert (compute.packages, compute.torch) == (("attrs>=23,<24", "six"), "2.1")
    assert compute_from_flags({"image": "python:3.12"}).image == "python:3.12"


def _exchange_offer(**extra: Any) -> dict[str, Any]:
    return {"id": "n1", "provider": "node", "instance_type": "gpu-box", "node_id": "n1",
            "region": "local", "gpu": "h100-80gb", "gpu_count": 2, "cpus": 30.0,
            "memory_gib": 240.0, "price_per_hour": 7.2345, "spot": False, **extra}


def test_exchange_offers_come_from_the_exchange_with_when_they_were_verified(
        exchange: FakeExchange) -> None:
    verified = 1_764_000_000.0
    exchange.offers = {"offers": [_exchange_offer(verified_at=verified, sla=0.987),
                                  _exchange_offer(id="o-abc", instance_type="node",
                                                  node_id=None, spot=True)]}
    result = CliRunner().invoke(cli, ["offers", "--exchange", "--gpu", "h100"])
    assert result.exit_code == 0, result.output
    header, first, second = result.stdout.splitlines()
    assert header.split() == ["OFFER", "PROVIDER", "NODE", "GPU", "COUNT", "CPUS", "MEMORY",
                              "$/H", "REGION", "RELIABILITY", "VERIFIED", "SINCE"]
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(verified))
    assert first.split() == ["n1", "node", "gpu-box", "h100-80gb", "2", "30", "240GiB",
                             "7.2345", "local", "98.7%", *stamp.split()]
    assert second.split()[-5:] == ["(spot)", "local", "-", "not", "verified"]
    [request] = [r for r in exchange.requests if r.url.path == "/api/v1/offers"]
    assert json.loads(request.content)["compute"]["gpu"]["requested"] == "h100"


def test_no_exchange_offer_explains_and_exits_1(exchange: FakeExchange) -> None:
    exchange.offers = {"offers": [], "explanation": ["gpu: 3 of 3 offers removed"]}
    result = CliRunner().invoke(cli, ["offers", "--exchange", "--gpu", "h100"])
    assert result.exit_code == 1
    assert "no offer on the exchange matches" in result.stderr
    assert "gpu: 3 of 3 offers removed" in result.stderr
    data = json.loads(CliRunner().invoke(cli, ["offers", "--exchange", "--json"]).stdout)
    assert data == {"offers": [], "explanation": ["gpu: 3 of 3 offers removed"]}


def test_an_exchange_offer_of_mig_slices_says_so(exchange: FakeExchange) -> None:
    exchange.offers = {"offers": [_exchange_offer(gpu="h200", gpu_slice="1g.18gb",
                                                  gpu_memory_mib=16384)]}
    result = CliRunner().invoke(cli, ["offers", "--exchange", "--gpu-memory", "16GB+"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].split()[3:6] == ["h200", "MIG", "1g.18gb"]
