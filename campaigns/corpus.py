"""The campaign's corpus: programs (IR values) that reached an edge no
earlier program had, kept in the campaign folder (``corpus/<id>.json``) so
``--resume`` goes on from them, ``report merge`` unions them and shards can
read one another's (``--corpus DIR``).

An entry records the torch and backend it was reached on: edges are lines of
one torch's files, and what a backend makes of a program is its own, so an
entry of another torch or backend is skipped, by name, never mutated from.
A corrupt entry is skipped the same way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from generators.check import check
from generators.ir import MalformedProgram, Program, from_dict, to_dict

FOLDER = "corpus"


@dataclass
class Entry:
    id: str
    program: Program
    origin: dict
    edges: list[str]  # the edges it reached first
    deduplicated: bool = False  # the pass made invoke_subgraph calls of it
    picks: int = 0  # times it was a mutation's parent
    paid: int = 0  # of those, mutants that reached something new
    known_crash: bool = False  # its run met a recorded crash: its mutants lose a trigger first (steer)

    @property
    def weight(self) -> float:
        """Parents that reached much, and whose mutants paid, are picked more,
        and those the pass deduplicated three times as often (most of what
        is under test runs only on them); each pick makes the next one less
        likely (every entry gets its turn)."""
        semantic = sum(1 for e in self.edges if ".py:" not in e)
        return ((1 + len(self.edges) + 20 * semantic) ** 0.5 * (1 + self.paid) / (1 + self.picks)
                * (3 if self.deduplicated else 1) / (3 if self.known_crash else 1))


@dataclass
class Corpus:
    folder: Optional[Path]  # None: kept in memory only
    torch: str
    backend: str
    entries: dict[str, Entry] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it was not loaded
    read: set = field(default_factory=set)  # files read already (loaded or skipped): a rescan reads only new ones

    def add(self, pid: str, program: Program, origin: dict, edges: list[str], deduplicated: bool = False,
            known_crash: bool = False) -> Entry:
        entry = self.entries[pid] = Entry(pid, program, origin, sorted(edges), deduplicated, known_crash=known_crash)
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{pid}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"id": pid, "torch": self.torch, "backend": self.backend, "origin": origin,
                                       "edges": entry.edges, "deduplicated": deduplicated,
                                       **({"known_crash": True} if known_crash else {}),
                                       "program": to_dict(program)}))
            os.replace(tmp, path)  # a reader never sees half an entry
        return entry

    def load(self, folder: Path) -> list[Entry]:
        """Entries of ``folder`` not read yet; those that do not load are
        recorded in ``skipped`` with the reason."""
        loaded = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            key = str(path)
            if key in self.read:
                continue
            self.read.add(key)
            entry, why = self._read(path)
            if entry is None:
                self.skipped[key] = why
            elif entry.id not in self.entries:
                self.entries[entry.id] = entry
                loaded.append(entry)
        return loaded

    def _read(self, path: Path) -> tuple[Optional[Entry], str]:
        try:
            d = json.loads(path.read_text())
            if not isinstance(d, dict) or not isinstance(d.get("edges"), list):
                return None, "corrupt: not a corpus entry"
            if d.get("torch") != self.torch:
                return None, f"written by torch {d.get('torch')}, this is torch {self.torch}"
            if d.get("backend") != self.backend:
                return None, f"written by backend {d.get('backend')}, this campaign runs {self.backend}"
            program = from_dict(d["program"])
            check(program)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
            return None, f"corrupt: {type(e).__name__}: {str(e)[:120]}"
        except MalformedProgram as e:
            return None, f"corrupt: not a valid program: {str(e)[:120]}"
        return Entry(str(d.get("id") or path.stem), program, dict(d.get("origin") or {}),
                     [str(e) for e in d["edges"]], bool(d.get("deduplicated")),
                     known_crash=bool(d.get("known_crash"))), ""

    def edges(self) -> set[str]:
        return {e for entry in self.entries.values() for e in entry.edges}
