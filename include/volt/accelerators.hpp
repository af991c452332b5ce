// volt/accelerators: umbrella header of this area.
#pragma once
