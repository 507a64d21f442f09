"""nbgrader settings for this course folder, so nbgrader's own commands (export, formgrader,
generate_feedback) see the same folders and gradebook as the `course` command: both are read
from course.yml by the course's own loader."""
import os

from autograder.config import load_course

c = get_config()  # noqa: F821 (provided by nbgrader)

_course = load_course(os.path.dirname(os.path.abspath(__file__)))
c.CourseDirectory.root = str(_course.root)
c.CourseDirectory.db_url = _course.gradebook_url
