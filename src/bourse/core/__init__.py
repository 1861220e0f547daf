"""Pure domain core: GPU catalogue, Compute, Offer, CUDA rules, matcher. No I/O."""
