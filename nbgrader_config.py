"""nbgrader settings for this course folder, so nbgrader's own commands (export, formgrader,
generate_feedback) see the same folders and gradebook as the `course` command."""
import os

import yaml

c = get_config()  # noqa: F821 (provided by nbgrader)

_here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_here, "course.yml"), encoding="utf-8") as _fh:
    _course = yaml.safe_load(_fh) or {}

c.CourseDirectory.root = _here
_url = _course.get("gradebook", "sqlite:///gradebook.db")
if _url.startswith("sqlite:///") and not _url.startswith("sqlite:////"):
    _url = "sqlite:///" + os.path.join(_here, _url[len("sqlite:///"):])
c.CourseDirectory.db_url = _url
