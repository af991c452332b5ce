// volt/cli: Lightning-style command-line flags mapped onto the compile-time policies.
#pragma once
