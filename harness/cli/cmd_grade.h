/* cmd_grade.h - `evictbench grade FILE.jsonl`: grade completions of any engine. */
#ifndef EB_CMD_GRADE_H
#define EB_CMD_GRADE_H

/* argv[0] is "grade"; returns the process exit code (0 ok, 1 error, 2 usage). */
int cmd_grade(int argc, char **argv);

#endif
