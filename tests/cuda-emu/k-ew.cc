#include "ew.cu"
