#include "spatial.cu"
