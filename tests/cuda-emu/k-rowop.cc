#include "rowop.cu"
