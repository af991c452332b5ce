// volt/distributed: multi-process training: cluster environments, the launcher, c10d process groups, the gradient reducer, samplers.
#pragma once
