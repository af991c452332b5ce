// volt/testing: umbrella header of this area.
#pragma once
