"""Plan files, validation, aggregation and reports."""
