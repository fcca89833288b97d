"""Scripts and campaigns leave nothing behind: each runs with a temporary
directory of its own (TMPDIR), which must be as it was (empty) afterwards,
but for torch's own compile caches (torch's, not ours to remove: a user's
next compile reuses them). The gate's campaign test
(``test_campaign.py``, workers killed by a hang and an abort) checks a
campaign so; here, every repro driver's script (``suites/tempdirs.py``).
"""

from __future__ import annotations

import pytest

from harness import warm
from reports.repro import DRIVERS
from suites.tempdirs import env, fresh_tmp, left


@pytest.mark.nightly
@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_each_repro_driver_leaves_the_temporary_directory_as_it_was(driver, tmp_path, request):
    from suites.test_repro_templates import _rendered

    script = tmp_path / "repro.py"
    script.write_text(_rendered(driver))
    with fresh_tmp() as tmp:
        done = warm.run([str(script)], timeout=300, cwd=request.config.rootpath, env=env(tmp))
        assert done.returncode in (0, 1, 2, 3), done.stderr[-3000:]  # the verdicts a repro gives, not a timeout
        assert left(tmp) == [], f"the {driver} repro left these in its temporary directory"
