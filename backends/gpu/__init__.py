"""What the GPU backends share below the Program: the CUDA driver handle and the caller's
stream (more of the shared GPU layer lands here as the backends converge)."""
