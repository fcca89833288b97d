"""``python -m harness``: the documented entry; the command line itself is ``campaigns.cli``, the top floor."""
from campaigns.cli import main  # the one import upward, by design: an entry point names the top floor

raise SystemExit(main())
