#include "matmul.cu"
