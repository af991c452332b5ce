// volt/transfer: umbrella header of this area.
#pragma once
