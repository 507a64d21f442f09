"""Grade one submission with a worker forked from a fresh, single-threaded process, as
`course autograde --student` starts one (`batch.launch.fork_worker`), and print what the pool saw as
JSON: run as `python -m tests.batch.early_fork_run COURSE ASSIGNMENT STUDENT SEED` by test_pool.py,
whose own process may hold threads and so cannot fork a worker itself."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from autograder.batch.launch import fork_worker

if __name__ == "__main__":
    course, assignment, student, seed = sys.argv[1:5]
    early = fork_worker(str(Path(course).resolve()), assignment, insecure=False)   # before imports start threads

    from autograder.batch.pool import LocalPool, make_pool
    from autograder.batch.worker import Task
    from autograder.layout import CourseLayout

    task = Task(student, str(CourseLayout(Path(course)).submission(student, assignment)), seed=int(seed))
    pool = make_pool(Path(course), assignment, submissions=1, early=early)
    try:
        assert isinstance(pool, LocalPool) and pool.size == 1
        pool.start()
        [(_, result)] = list(pool.run([task]))
        adopted = pool.stats[0].pid == early.popen.pid
    finally:
        pool.close()
    print(json.dumps({"adopted": adopted, "stopped": early.popen.poll() is not None,
                      "log_folder_left": early.log.parent.exists(), "state": result.state,
                      "tests": [[t.name, t.score, t.status] for t in result.tests],
                      "total": [result.score, result.max_score, result.seed]}))
