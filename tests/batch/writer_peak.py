"""Send one student's result, with their submission folder to copy into autograded/, to a real
gradebook writer process (autograder.batch.writer) and print what it did and its peak memory:

    python -m tests.batch.writer_peak COURSE_DIR STUDENT

prints one JSON line: {"peak_kb": ..., "recorded": [...], "output_errors": [...]}. The writer is this
process's only child, so its peak resident size is RUSAGE_CHILDREN's ru_maxrss once it has exited
(run by tests/batch/test_writer.py)."""
from __future__ import annotations

import json
import resource
import sys

from autograder.batch.writer import GradebookProcess
from autograder.config import load_course
from autograder.grading.results import SubmissionResult, TestResult


def main(course_dir: str, student: str) -> int:
    course = load_course(course_dir)
    a = course.assignment("transformer-block")
    folder = course.layout.submission(student, a.name)
    first = a.problems[0]
    result = SubmissionResult(
        student=student, assignment=a.name, state="graded", seed=1, on_roster=True,
        problems=tuple(p.name for p in a.problems), problem_points=tuple((p.name, p.points) for p in a.problems),
        tests=(TestResult(name=f"test_{first.name}_x", problem=first.name, score=first.points,
                          max_score=first.points, status="passed"),),
        files=(course.layout.relative(folder / a.notebooks[0]),))
    with GradebookProcess(course_dir, a.name) as gb:
        gb.record(result, copy_from=folder)
        report = gb.finish()
    print(json.dumps({"peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                      "recorded": list(report.gradebook.recorded), "output_errors": list(report.output_errors)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
