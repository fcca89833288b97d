"""A campaign's findings as JUnit XML, so a CI system shows them as test results.

One testcase per distinct finding: a new one fails, a known issue is skipped
(recorded, not hidden); one more testcase, "campaign", fails when the campaign
stopped early, and "harness_errors" is an error when the harness failed runs
itself. Built with ``xml.etree`` so escaping is never hand-made.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from reports.schema import harness_errors_line

# Characters XML 1.0 cannot hold even escaped; compiler messages can carry them.
_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(value: object) -> str:
    return _INVALID.sub("?", "" if value is None else str(value))


def render_junit(summary: dict) -> str:
    """JUnit XML for ``summary`` (see ``reports.schema``)."""
    findings = list(summary.get("findings") or [])
    seconds = float(summary.get("seconds") or 0.0)
    name = f"fuzz campaign {summary.get('backend', '?')} seed {summary.get('seed', '?')}"
    if summary.get("shard"):
        name += f" shard {summary['shard']}"
    root = ET.Element("testsuites", name="dedup-harness")
    suite = ET.SubElement(root, "testsuite", name=_clean(name))
    props = ET.SubElement(suite, "properties")
    for key in ("backend", "torch", "python", "seed", "shard", "workers", "programs", "programs_per_second"):
        if summary.get(key) is not None:
            ET.SubElement(props, "property", name=key, value=_clean(summary[key]))
    failures = skipped = 0
    for f in findings:
        case = ET.SubElement(suite, "testcase", classname=_clean(f.get("oracle")), name=_clean(f.get("signature")),
                             time="0")
        message = _clean(f.get("message"))
        if f.get("known_issue"):
            skipped += 1
            ET.SubElement(case, "skipped", message=f"known issue {_clean(f['known_issue'])}")
        else:
            failures += 1
            fail = ET.SubElement(case, "failure", message=message.splitlines()[0][:500] if message else "new finding",
                                 type=_clean(f.get("kind")))
            fail.text = (f"{message}\n\nhits: {f.get('count')}\nculprit: {_clean(f.get('culprit'))}\n"
                         f"first failing layer: {_clean(f.get('layer'))}\nrepro: {_clean(f.get('folder'))}/repro.py\n")
    case = ET.SubElement(suite, "testcase", classname="harness", name="campaign", time=f"{seconds:.3f}")
    if summary.get("aborted"):
        failures += 1
        ET.SubElement(case, "failure", message=_clean(summary["aborted"]), type="aborted").text = (
            f"the campaign stopped early after {summary.get('programs', '?')} programs: {_clean(summary['aborted'])}")
    errors = (summary.get("errors") or {}).get("harness_error", 0)
    if errors:  # the harness's own failures (one more testcase): CI shows an error, not a clean run
        case = ET.SubElement(suite, "testcase", classname="harness", name="harness_errors", time="0.000")
        ET.SubElement(case, "error", message=_clean(harness_errors_line(summary))[:500], type="harness_error")
    counts = {"tests": str(len(findings) + 1 + bool(errors)), "failures": str(failures), "errors": str(int(bool(errors))),
              "skipped": str(skipped),
              "time": f"{seconds:.3f}"}
    suite.attrib.update(counts)
    root.attrib.update(counts)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
