"""Grading a class: warm workers (one sandbox host and one grader session each, reused for many
submissions), run as local processes or on a Dask cluster, and the one process that writes the
gradebook. `autograder.api.autograde` drives them."""
