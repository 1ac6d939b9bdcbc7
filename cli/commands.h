/* The subcommands of the `gradcache` program. Each gets the whole argv (its flags begin
 * after its name: argv[2] for train, argv[3] for "data wordnet") and returns the exit status:
 * 0 success, 1 a failure while running, 2 a usage error (bad flag or value). */
#ifndef GC_CLI_COMMANDS_H
#define GC_CLI_COMMANDS_H

int gc_command_data(int argc, char **argv);         /* gradcache data wordnet ... */
int gc_command_train(int argc, char **argv);        /* gradcache train ... */
int gc_command_eval(int argc, char **argv);         /* gradcache eval ... */
int gc_command_verify(int argc, char **argv);       /* gradcache verify ... */
int gc_command_bench(int argc, char **argv);        /* gradcache bench memory|speed ... */
int gc_command_launch(int argc, char **argv);       /* gradcache launch -n N -- PROGRAM ... */

#endif
