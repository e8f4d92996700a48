"""What a run found, as files and verdicts: reports, KCIDB, history, known issues, review."""
