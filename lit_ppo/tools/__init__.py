"""Command-line tools beside fit/validate/test/predict: ``export``, ``plot``, ``profile``; each imports its optional
dependencies only when it runs."""
