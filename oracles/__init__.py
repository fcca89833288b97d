"""Oracles: each judges an Outcome and returns a Verdict; none raises for a compiler failure."""
