// volt/loggers: umbrella header of this area.
#pragma once
