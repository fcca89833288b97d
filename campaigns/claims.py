"""Once-only follow-ups across the shards of one campaign.

Shards of one seed draw different programs but meet the same root causes;
minimizing, localizing and running the repro of one is minutes of work that
one shard should do while the others only count their hits. The shards
share a folder (on the file system they already share for their output);
a claim is a file created atomically (``O_CREAT | O_EXCL``, atomic on local
file systems and NFS alike), kept fresh by its owner's heartbeat, marked
done when the follow-up ends. A claim whose owner is gone (its process is
dead on this host, or its heartbeat stopped) is stale and is taken over by
the next shard that meets the root cause.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Optional

HEARTBEAT = 10.0  # seconds between refreshes of the claims a shard holds
STALE = 120.0  # a claim not refreshed this long has lost its owner (a killed or suspended job)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def campaign_key(backend: str, seed: int, torch: str, mode: str) -> str:
    """The claims of one campaign's shards, apart from any other campaign's in the same folder."""
    label = re.sub(r"[^A-Za-z0-9.]+", "-", f"{backend}-seed{seed}-torch{torch}-{mode}").strip("-")[:80]
    return f"{label}-{hashlib.sha1(f'{backend}|{seed}|{torch}|{mode}'.encode()).hexdigest()[:8]}"


class Claims:
    def __init__(self, folder: Path, key: str, shard: str, out: Path, stale: float = STALE):
        self.dir = folder / key
        self.dir.mkdir(parents=True, exist_ok=True)
        self.owner = {"shard": shard, "host": socket.gethostname(), "pid": os.getpid(), "out": str(out)}
        self.stale_after = stale
        self.held: set[str] = set()  # signatures this shard follows up and has not finished
        self.last_beat = 0.0

    def _path(self, signature: str) -> Path:
        return self.dir / (hashlib.sha1(signature.encode()).hexdigest()[:20] + ".json")

    def _create(self, signature: str) -> bool:
        try:
            fd = os.open(self._path(signature), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump({"signature": signature, "owner": self.owner, "state": "running", "at": time.time()}, f)
        self.held.add(signature)
        return True

    def read(self, signature: str) -> Optional[dict]:
        """The claim on ``signature`` (an empty dict while its owner is still writing it), or None."""
        path = self._path(signature)
        try:
            text, mtime = path.read_text(), path.stat().st_mtime
        except FileNotFoundError:
            return None
        try:
            claim = json.loads(text)
        except json.JSONDecodeError:
            claim = {}
        return {**claim, "mtime": mtime}

    def is_stale(self, claim: dict) -> bool:
        if claim.get("state") == "done":
            return False
        owner = claim.get("owner") or {}
        if owner.get("host") == self.owner["host"] and isinstance(owner.get("pid"), int) \
                and owner["pid"] != os.getpid() and not _alive(owner["pid"]):
            return True
        return time.time() - claim["mtime"] > self.stale_after

    def take(self, signature: str) -> tuple[bool, str]:
        """Whether this shard follows ``signature`` up, and if not, who does."""
        if signature in self.held or self._create(signature):
            return True, ""
        claim = self.read(signature)
        if claim is None:  # released between the two looks
            return self.take(signature)
        if self.is_stale(claim):
            path = self._path(signature)
            try:  # one shard wins the rename; the others see the fresh claim it creates
                path.rename(path.with_name(f"{path.stem}.stale-{os.getpid()}-{time.time():.0f}"))
            except FileNotFoundError:
                pass
            if self._create(signature):
                return True, f"taken over from shard {(claim.get('owner') or {}).get('shard')}"
            claim = self.read(signature) or {}
        owner = claim.get("owner") or {}
        return False, f"claimed by shard {owner.get('shard', '?')} ({owner.get('out', '?')})"

    def done(self, signature: str) -> None:
        """The follow-up is finished: no one takes it over."""
        if signature not in self.held:
            return
        self.held.discard(signature)
        claim = self.read(signature)
        if not claim or claim.get("owner") != self.owner:
            return  # taken over meanwhile (this shard looked gone): the new owner finishes it
        tmp = self._path(signature).with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({**{k: v for k, v in claim.items() if k != "mtime"}, "state": "done",
                                   "at": time.time()}))
        os.replace(tmp, self._path(signature))

    def release(self, signature: Optional[str] = None) -> None:
        """A claim given up (every unfinished one of a stopping shard): the next shard to meet it takes it over."""
        for held in [signature] if signature is not None else list(self.held):
            claim = self.read(held)
            if claim is not None and claim.get("owner") == self.owner:
                self._path(held).unlink(missing_ok=True)
            self.held.discard(held)

    def heartbeat(self) -> None:
        """Refresh the claims held (their files' times): the campaign calls this every HEARTBEAT seconds."""
        self.last_beat = time.time()
        for signature in self.held:
            try:
                os.utime(self._path(signature))
            except FileNotFoundError:
                pass
