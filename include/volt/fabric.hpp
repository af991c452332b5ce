// volt/fabric: volt::Fabric, the lighter API: setup, backward, to_device, autocast, save/load, collectives.
#pragma once
