/* CPU kernels of the signal processing group: DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_signal[] = {
    NULL,
};
