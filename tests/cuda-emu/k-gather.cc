#include "gather.cu"
