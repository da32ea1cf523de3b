/* cmd_tokenize.c - `evictbench tokenize`: token ids of a text and the round trip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_tokenizer.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"

static void print_help(void)
{
    printf("usage: evictbench tokenize --model M [--chat r1|chatml|qwen3|qwen2.5|raw] [--no-special] [--] TEXT\n\n"
           "Prints the token ids of TEXT (wrapped in the chat template when --chat is\n"
           "given), one token per line with its text, then the decoded round trip.\n"
           "Special tokens written in TEXT are matched unless --no-special.\n"
           "'--' ends the options: the argument after it is TEXT, even if it starts with '-'.\n");
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *chat = "raw", *text = NULL;
    int parse_special = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_help(); return 0; }
        if (!strcmp(argv[i], "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(argv[i], "--chat")) {
            if (!(chat = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(argv[i], "--no-special")) {
            parse_special = 0;
        } else if (!strcmp(argv[i], "--")) {  /* the end of options: TEXT follows */
            if (i + 2 != argc || text)
                return cli_error("tokenize: '--' must be followed by exactly one argument, TEXT");
            text = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return cli_errorf("tokenize: unknown option '%s'", argv[i]);
        } else if (!text) {
            text = argv[i];
        } else {
            return cli_errorf("tokenize: unexpected argument '%s'", argv[i]);
        }
    }
    if (!model) return cli_error("tokenize: missing --model (see evictbench tokenize --help)");
    if (!text) return cli_error("tokenize: missing TEXT");

    struct eb_err e = {0};
    enum chat_template tpl;
    if (chat_template_parse(chat, &tpl, &e)) return cli_error(e.msg);
    struct model_file *mf = NULL;
    if (model_file_open(model, &mf, &e)) return cli_error(e.msg);
    struct tokenizer *tok = NULL;
    if (model_file_tokenizer(mf, &tok, &e)) { model_file_close(mf); return cli_error(e.msg); }

    int rc = 1, *ids = NULL, n = 0;
    char *rendered = chat_render(tpl, text, &e), *decoded = NULL;
    size_t dlen = 0;
    if (!rendered) { cli_error(e.msg); goto done; }
    if (tokenizer_encode(tok, rendered, strlen(rendered), parse_special, &ids, &n, &e)) {
        cli_error(e.msg);
        goto done;
    }
    printf("%d tokens\n", n);
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *b = tokenizer_token_bytes(tok, ids[i], &len);
        printf("%6d  ", ids[i]);
        for (size_t k = 0; k < len; k++) {
            unsigned char ch = (unsigned char)b[k];
            if (ch == '\n') fputs("\\n", stdout);
            else if (ch == '\t') fputs("\\t", stdout);
            else if (ch < 0x20) printf("\\x%02x", ch);
            else putchar(ch);
        }
        putchar('\n');
    }
    if (tokenizer_decode(tok, ids, n, &decoded, &dlen, &e)) { cli_error(e.msg); goto done; }
    printf("round trip: %s\n", (dlen == strlen(rendered) && !memcmp(decoded, rendered, dlen)) ? "exact" : "DIFFERS");
    rc = 0;
done:
    free(ids);
    free(rendered);
    free(decoded);
    tokenizer_free(tok);
    model_file_close(mf);
    return rc;
}
