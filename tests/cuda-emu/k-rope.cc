#include "rope.cu"
