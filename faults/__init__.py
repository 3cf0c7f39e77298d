"""Fault injection for Herald: real worker processes, a real PostgreSQL, and a checker.

``python -m faults run --short`` runs every scenario's short version (CI);
``python -m faults run --full`` runs the full versions and writes the report. See
docs/reliability.md for what is checked and the figures of the last run.
"""
