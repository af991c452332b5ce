// volt/callbacks: umbrella header of this area.
#pragma once
