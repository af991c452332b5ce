// volt/trainer: umbrella header of this area.
#pragma once
