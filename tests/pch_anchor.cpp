// Anchors the precompiled headers (<torch/torch.h>, <volt/volt.hpp>) that the test binaries reuse.
