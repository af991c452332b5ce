// volt/precision: umbrella header of this area.
#pragma once
