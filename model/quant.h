/* quant.h - moved to kernels/quant.h (the backends dequantize too). */
#include "../kernels/quant.h"
