"""Findings: triage into stable signatures, known issues, repro scripts, campaign reports."""
