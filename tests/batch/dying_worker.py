"""A pool worker process (autograder.batch.worker) that is killed (SIGKILL, as the kernel's
out-of-memory killer would) when it starts grading a student named in DYING_WORKER_STUDENTS, the
first time only: run as `python -m tests.batch.dying_worker ...` by tests of the pool. Each death is
recorded as a file named after the student in the folder DYING_WORKER_MARKS, which tells the next
worker it happened already (DYING_WORKER_TIMES: how many times it happens, 1 by default)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from autograder.batch import worker
from autograder.grading.results import SubmissionResult

if __name__ == "__main__":
    students = set(os.environ["DYING_WORKER_STUDENTS"].split(","))
    marks = Path(os.environ["DYING_WORKER_MARKS"])
    times = int(os.environ.get("DYING_WORKER_TIMES", "1"))
    grade = worker.Worker.grade

    def dying_grade(self: worker.Worker, task: worker.Task) -> SubmissionResult:
        if task.student in students:
            deaths = len(list(marks.glob(f"{task.student}.*")))
            if deaths < times:
                (marks / f"{task.student}.{deaths}").touch()
                os.kill(os.getpid(), signal.SIGKILL)
        return grade(self, task)

    worker.Worker.grade = dying_grade  # type: ignore[method-assign]
    sys.exit(worker.main())
