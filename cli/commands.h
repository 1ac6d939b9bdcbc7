/* The subcommands of the `gradcache` program. Each gets the whole argv (its flags begin
 * after its name: argv[2] for train, argv[3] for "data wordnet") and returns the exit status:
 * 0 success, 1 a failure while running, 2 a usage error (bad flag or value). (gradcache bench
 * memory|speed: bench_commands.h.) */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

int cli_command_data(int argc, char **argv);         /* gradcache data wordnet ... */
int cli_command_train(int argc, char **argv);        /* gradcache train ... */
int cli_command_eval(int argc, char **argv);         /* gradcache eval ... */
int cli_command_encode(int argc, char **argv);       /* gradcache encode ... */
int cli_command_mine(int argc, char **argv);         /* gradcache mine ... */
int cli_command_verify(int argc, char **argv);       /* gradcache verify ... */
int cli_command_model(int argc, char **argv);        /* gradcache model fetch NAME ... */
int cli_command_launch(int argc, char **argv);       /* gradcache launch -n N -- PROGRAM ... */

#endif
