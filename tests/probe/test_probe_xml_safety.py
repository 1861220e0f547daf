"""Malicious or broken ``nvidia-smi -q -x`` output is an error report, never a crash or an
expansion: entity declarations, external entities, internal DTD subsets and huge input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bourse.agent.probe import SmiOutputError, parse_xml
from bourse.agent.probe.smi_xml import MAX_XML_CHARS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<nvidia_smi_log><driver_version>&lol9;</driver_version></nvidia_smi_log>"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [<!ENTITY secret SYSTEM "file:///etc/shadow">]>
<nvidia_smi_log><driver_version>&secret;</driver_version></nvidia_smi_log>"""

# The smallest entity declaration.
ENTITY_ONLY = '<!DOCTYPE a [<!ENTITY e "x">]><nvidia_smi_log>&e;</nvidia_smi_log>'


@pytest.mark.parametrize("text", [BILLION_LAUGHS, EXTERNAL_ENTITY, ENTITY_ONLY])
def test_entity_declarations_are_refused(text: str) -> None:
    with pytest.raises(SmiOutputError, match="refused"):
        parse_xml(text)


def test_defusedxml_refuses_entities_even_past_the_subset_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bourse.agent.probe.smi_xml._INTERNAL_SUBSET", re.compile("(?!)"))
    with pytest.raises(SmiOutputError, match="unsafe XML refused"):
        parse_xml(BILLION_LAUGHS)


def test_fifty_megabytes_are_refused_before_parsing() -> None:
    huge = "<nvidia_smi_log>" + "<gpu/>" * (50 * 2**20 // 6) + "</nvidia_smi_log>"
    assert len(huge) > MAX_XML_CHARS
    with pytest.raises(SmiOutputError, match="more than"):
        parse_xml(huge)


@pytest.mark.parametrize(("text", "message"), [
    ("<nvidia_smi_log><gpu>", "not well-formed"),
    ("", "not well-formed"),
    ("<html><body>502</body></html>", "root element <html>"),
])
def test_broken_output_is_an_error_not_a_crash(text: str, message: str) -> None:
    with pytest.raises(SmiOutputError, match=message):
        parse_xml(text)


def test_nvidia_smis_own_doctype_is_accepted() -> None:
    text = (FIXTURES / "xml-a10g-drv515.xml").read_text()
    assert '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">' in text
    assert parse_xml(text).driver == "515.105.01"
