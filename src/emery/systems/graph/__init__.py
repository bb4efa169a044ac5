"""Workflow graphs: a DAG of llm, code, map and output nodes optimized like a program."""
