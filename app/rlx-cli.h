/* Subcommands of the `rlx` command-line tool. Each takes the arguments after
 * its own name (argv[0] is the subcommand) and returns the process exit code. */
#ifndef RLX_APP_RLX_CLI_H
#define RLX_APP_RLX_CLI_H

int rlx_cmd_info(int argc, char **argv);
int rlx_cmd_tokenize(int argc, char **argv);
int rlx_cmd_generate(int argc, char **argv);
int rlx_cmd_chat(int argc, char **argv);
int rlx_cmd_quantize(int argc, char **argv);
int rlx_cmd_make_model(int argc, char **argv);
int rlx_cmd_perplexity(int argc, char **argv);

/* Print a one-line error "rlx: <message>" to stderr and return 1. */
int rlx_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
