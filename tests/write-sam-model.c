/* write-sam-model OUT [hf|pt] [--layout L] [--f16]: the random-weight SAM of
 * tests/sam-writer.h (the PyTorch reference's weights) at OUT: as
 * safetensors with segment_anything's tensor names, or Hugging Face's with
 * "hf", or with "pt" as torch.save writes a state dict (official names, as
 * the sam_vit_*.pth release; tests/torch-writer.h). By default the small
 * test layout; with --layout vit_b / vit_l / vit_h / mobile_sam / sam2.1_hiera_tiny (_small,
 * _base_plus, _large) the published shapes (for benchmarks; SAM 2.1 with "hf" under
 * transformers' Sam2Model names), F16 with --f16. For the shell and UI tests of `rlx segment`
 * and the Segment page, tests/reference/check_torch_writer.py and
 * tools/bench-sam.sh. Exit 0, or 1 with a sentence on stderr. */
#include <stdio.h>
#include <string.h>

#include "sam-writer.h"

int main(int argc, char **argv)
{
    rlx_sam_writer_opts o = {0};
    bool ok = argc >= 2;
    for (int i = 2; ok && i < argc; i++) {
        if (strcmp(argv[i], "hf") == 0)
            o.hf_names = true;
        else if (strcmp(argv[i], "pt") == 0)
            o.torch = true;
        else if (strcmp(argv[i], "--f16") == 0)
            o.f16 = true;
        else if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc)
            o.layout = argv[++i];
        else
            ok = false;
    }
    if (!ok) {
        fprintf(stderr, "usage: write-sam-model OUT.safetensors [hf] | OUT.pth pt [--layout "
                        "test|vit_b|vit_l|vit_h|mobile_sam|sam2.1_hiera_tiny|...] [--f16]\n");
        return 1;
    }
    rlx_error *err = NULL;
    if (rlx_sam_writer_write(argv[1], &o, &err) != RLX_OK) {
        fprintf(stderr, "write-sam-model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    return 0;
}
