/* How the subcommands report a failure: ONE line "gradcache <command>: <problem>" on stderr,
 * naming the flag or the file, and an exit status (1 a failure while running, 2 a usage
 * error), as flags.c reports a bad flag. */
#ifndef CLI_ERRORS_H
#define CLI_ERRORS_H

/* Prints the line; returns exit_status, so that a command can `return cli_fail(...)`. */
int cli_fail(const char *command, int exit_status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The line for a model --model could not load: a usage error (2) naming --max-length when the
 * library said the length asked for leaves no room for text (GC_ERR_CONFIG), else 1. */
int cli_fail_model(const char *command);

#endif
