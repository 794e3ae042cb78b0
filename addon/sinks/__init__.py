"""Where verdicts go: the structured log (with its redaction) and the Prometheus metrics."""
