"""Malicious or broken ``nvidia-smi -q -x`` output is an error report, never a crash or an
expansion: entity declarations, external entities, anything but element and attribute
declarations in an internal DTD subset, and huge input. ``-q -x --dtd`` output, whose DTD
declares elements and attributes only, is read."""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import fromstring

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
DOCTYPE_LINE = '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">'


def inline_dtd(capture: str = "xml-gtx1080-x2-drv460.xml", extra: str = "") -> str:
    """The capture as ``nvidia-smi -q -x --dtd`` prints it: its DOCTYPE line replaced by an
    internal subset declaring each of its elements (``(#PCDATA)`` for leaves) and the ``gpu``
    element's ``id`` attribute, plus ``extra``. DERIVED from a real capture, listed in
    tests/fixtures/nvidia-smi/MANIFEST.md; no verbatim ``--dtd`` capture was found."""
    text = (FIXTURES / capture).read_text()
    elements = {e.tag: len(e) > 0 for e in fromstring(text).iter()}
    declarations = [f"<!ELEMENT {tag:<23} {'ANY' if parent else '(#PCDATA)'}>"
                    for tag, parent in elements.items()]
    subset = "\n".join(["<!-- nvsmi_device_v11.dtd -->", *declarations,
                        "<!ATTLIST gpu id CDATA #REQUIRED>", extra])
    assert DOCTYPE_LINE in text
    return text.replace(DOCTYPE_LINE, f"<!DOCTYPE nvidia_smi_log [\n{subset}\n]>")


def test_an_embedded_dtd_of_elements_and_attributes_is_read() -> None:
    text = inline_dtd()
    assert "<!ELEMENT product_name            (#PCDATA)>" in text
    found = parse_xml(text)
    plain = parse_xml((FIXTURES / "xml-gtx1080-x2-drv460.xml").read_text())
    assert (found.driver, found.cuda, [g.uuid for g in found.gpus]) == (
        "460.27.04", "11.2", ["GPU-683c6e09-3969-31a5-b7ca-cc88252b7fce",
                              "GPU-90e3dab0-b59d-8bf6-d909-d4fab8d2f29b"])
    assert found == plain


@pytest.mark.parametrize("extra", [
    '<!ENTITY lol "lol">',  # an entity beside the element declarations
    '<!ENTITY % remote SYSTEM "http://127.0.0.1:9/x.dtd"> %remote;',  # external parameter entity
    "%remote;",  # a parameter entity reference
    '<!NOTATION gif SYSTEM "image/gif">',
    "<?xml-stylesheet href='x'?>",
    '<!ATTLIST gpu vendor CDATA "&lol;">',  # an entity reference in a default value
    '<![INCLUDE[ <!ENTITY lol "lol"> ]]>',  # a conditional section
])
def test_anything_but_element_and_attribute_declarations_is_refused(extra: str) -> None:
    with pytest.raises(SmiOutputError, match="refused"):
        parse_xml(inline_dtd(extra=extra))


@pytest.mark.parametrize("text", [BILLION_LAUGHS, EXTERNAL_ENTITY, ENTITY_ONLY])
def test_entity_declarations_are_refused(text: str) -> None:
    with pytest.raises(SmiOutputError, match="refused"):
        parse_xml(text)


def test_a_second_doctype_is_checked_too() -> None:
    """A harmless DOCTYPE inside a comment does not let a later one through unchecked."""
    text = "<!-- <!DOCTYPE x []> -->\n" + BILLION_LAUGHS.split("\n", 1)[1]
    with pytest.raises(SmiOutputError, match="refused"):
        parse_xml(text)


def test_defusedxml_refuses_entities_even_past_the_subset_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bourse.agent.probe.smi_xml.check_doctype", lambda text: None)
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
