"""Line and branch coverage of torch's own deduplication code, combined
from every worker's data file (``--coverage``): what the generator reaches,
and the lines it never does."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


def combine(folder: Path, paths: Optional[list[str]]) -> dict:
    """{path relative to site-packages: {lines, branches, missing}} for each
    measured file (``paths``; None: whatever the data holds)."""
    import coverage

    files = [str(p) for p in folder.glob(".coverage.*")]
    if not files:
        return {}
    cov = coverage.Coverage(data_file=str(folder / ".coverage"), branch=True)
    cov.combine(files, keep=True)
    cov.save()
    data = cov.get_data()
    out = {}
    for path in paths or sorted(data.measured_files()):
        if not Path(path).exists():
            continue
        analysis = cov._analyze(path)  # the public API offers line numbers, not branch totals
        numbers = analysis.numbers
        lines = 100.0 * (numbers.n_statements - numbers.n_missing) / numbers.n_statements if numbers.n_statements else 100.0
        branches = (100.0 * (numbers.n_branches - numbers.n_missing_branches) / numbers.n_branches
                    if numbers.n_branches else 100.0)
        short = path.split("site-packages/")[-1]
        out[short] = {"lines": round(lines, 1), "branches": round(branches, 1),
                      "missing": analysis.missing_formatted(), "statements": numbers.n_statements}
    return out
