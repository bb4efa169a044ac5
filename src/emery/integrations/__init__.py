"""Integrations with outside tools: a job tracked as an MLflow run."""
