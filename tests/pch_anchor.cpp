// Anchors the precompiled <torch/torch.h> that every test binary reuses.
