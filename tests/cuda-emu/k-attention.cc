#include "attention.cu"
