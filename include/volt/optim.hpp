// volt/optim: multi-tensor (foreach) and fused optimizer steps.
#pragma once
