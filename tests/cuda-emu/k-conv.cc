#include "conv.cu"
