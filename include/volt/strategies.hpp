// volt/strategies: umbrella header of this area.
#pragma once
