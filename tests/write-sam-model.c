/* write-sam-model OUT [hf|pt]: the small random-weight SAM of
 * tests/sam-writer.h (the PyTorch reference's weights) at OUT: as
 * safetensors with segment_anything's tensor names, or Hugging Face's with
 * "hf", or with "pt" as torch.save writes a state dict (official names, as
 * the sam_vit_*.pth release; tests/torch-writer.h). For the shell and UI
 * tests of `rlx segment` and the Segment page, and for
 * tests/reference/check_torch_writer.py. Exit 0, or 1 with a sentence on
 * stderr. */
#include <stdio.h>
#include <string.h>

#include "sam-writer.h"

int main(int argc, char **argv)
{
    if ((argc != 2 && argc != 3) ||
        (argc == 3 && strcmp(argv[2], "hf") != 0 && strcmp(argv[2], "pt") != 0)) {
        fprintf(stderr, "usage: write-sam-model OUT.safetensors [hf] | OUT.pth pt\n");
        return 1;
    }
    rlx_error *err = NULL;
    rlx_sam_writer_opts o = {.hf_names = argc == 3 && strcmp(argv[2], "hf") == 0,
                             .torch = argc == 3 && strcmp(argv[2], "pt") == 0};
    if (rlx_sam_writer_write(argv[1], &o, &err) != RLX_OK) {
        fprintf(stderr, "write-sam-model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    return 0;
}
