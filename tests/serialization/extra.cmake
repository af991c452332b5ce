# Files exchanged with Python (volt_python_interop_test, tests/CMakeLists.txt):
# * weights: torch.load reads volt's files and volt reads torch.save's (tests/python/check_weights.py);
# * safetensors files with Python's safetensors package (tests/python/check_safetensors.py; a skip when
#   VOLT_PYTHON lacks the package);
# * checkpoints with Python and Lightning (tests/python/check_checkpoint.py): torch.load(weights_only=True) opens a
#   volt checkpoint and its state_dict loads strictly into the same model in PyTorch; a Lightning checkpoint's
#   state_dict loads into volt. The Lightning part reports a skip when VOLT_PYTHON lacks lightning.
volt_python_interop_test(volt_weights_tool ${CMAKE_CURRENT_LIST_DIR}/interop/weights_tool.cpp
                         volt.serialization.python check_weights.py)
volt_python_interop_test(volt_safetensors_tool ${CMAKE_CURRENT_LIST_DIR}/interop/safetensors_tool.cpp
                         volt.serialization.safetensors_python check_safetensors.py)
volt_python_interop_test(volt_checkpoint_tool ${CMAKE_CURRENT_LIST_DIR}/interop/checkpoint_tool.cpp
                         volt.serialization.checkpoint_python check_checkpoint.py)
