"""nbgrader settings for this course folder, read from course.yml: the folders, gradebook, course id
and exchange, and nbgrader's generate_assignment, autograde, generate_feedback and export routed
through the course's engine (see autograder/nbgrader_hooks.py), so nbgrader's commands and formgrader's
buttons agree with the `course` command."""
import os

from autograder.nbgrader_hooks import configure

configure(get_config(), os.path.dirname(os.path.abspath(__file__)))  # noqa: F821 (provided by nbgrader)
