/* Running a program to its end (the pip and the unzip of a model fetch). */
#ifndef GC_FETCH_RUN_PROGRAM_H
#define GC_FETCH_RUN_PROGRAM_H

/* Runs argv (argv[0] found on the PATH; exit status 127 when there is none) and waits: its
 * exit status, or -1 when it could not be started or did not exit normally. The program dies
 * with this process: a fetch killed during its download takes pip with it, rather than leave
 * it writing into a temporary folder that the next fetch removes. */
int gc_run_program(char *const *argv);

#endif
