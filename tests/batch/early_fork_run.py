"""Grade submissions with workers forked from a fresh, single-threaded process, as `course autograde`
starts them (`batch.launch.fork_worker`: one for `--student`, one per pool slot for a batch, each
for its slot's CPU), and print what the pool saw as JSON: run as `python -m tests.batch.early_fork_run
COURSE ASSIGNMENT SEED STUDENT...` by test_pool.py, whose own process may hold threads and so cannot
fork a worker itself."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from autograder.batch.launch import fork_worker, log_folder

if __name__ == "__main__":
    course, assignment, seed, *students = sys.argv[1:]
    cpus = sorted(os.sched_getaffinity(0))
    logs = log_folder() if len(students) > 1 else None
    # before the imports below start threads; a lone worker chooses its CPU, a pool's go in turn
    early = [fork_worker(str(Path(course).resolve()), assignment, insecure=False, logs=logs,
                         cpu=cpus[i % len(cpus)] if len(students) > 1 else None) for i in range(len(students))]

    from autograder.batch.pool import LocalPool, make_pool
    from autograder.batch.worker import Task
    from autograder.layout import CourseLayout

    tasks = [Task(s, str(CourseLayout(Path(course)).submission(s, assignment)), seed=int(seed)) for s in students]
    pool = make_pool(Path(course), assignment, workers=len(students), submissions=len(students), early=early)
    try:
        assert isinstance(pool, LocalPool) and pool.size == len(students)
        pool.start()
        results = {task.student: result for task, result in pool.run(tasks)}
        adopted = [s.pid for s in pool.stats] == [e.popen.pid for e in early]
    finally:
        pool.close()
    print(json.dumps({"adopted": adopted, "stopped": all(e.popen.poll() is not None for e in early),
                      "log_folder_left": any(e.log.parent.exists() for e in early),
                      "results": {s: {"state": r.state, "tests": [[t.name, t.score, t.status] for t in r.tests],
                                      "total": [r.score, r.max_score, r.seed]} for s, r in results.items()}}))
