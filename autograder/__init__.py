"""Autograder for numpy notebook assignments: student code runs in a sandboxed child process,
hidden pytest graders run in a trusted process that never imports it."""

__version__ = "0.1.0"
